package anthropic

import "encoding/json"

// The Anthropic Messages API bodies, as the official SDKs send and read
// them. Fields the server cannot honour are decoded so that a request using
// them is refused by name; the rest of the API's many optional fields
// (metadata, service_tier, container …) are accepted and ignored by
// encoding/json.

type request struct {
	Model         string          `json:"model"`
	System        json.RawMessage `json:"system"` // a string or an array of text blocks
	Messages      []message       `json:"messages"`
	MaxTokens     *int            `json:"max_tokens"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        bool            `json:"stream"`
	Tools         json.RawMessage `json:"tools"`       // see tool
	ToolChoice    json.RawMessage `json:"tool_choice"` // see toolChoice
	MCPServers    json.RawMessage `json:"mcp_servers"`
	OutputConfig  *struct {
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"` // the structured-outputs beta's spelling
	// Thinking turns the template's reasoning on or off; see
	// thinkingConfig.
	Thinking json.RawMessage `json:"thinking"`
	// CacheControl is the request-level breakpoint ("automatic caching"):
	// the whole prompt is the marked prefix.
	CacheControl *cacheControl `json:"cache_control"`
}

// imageSource is an image block's source: base64 data, or a url the
// server fetches when it allows remote media (wire.FetchMedia).
type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of content blocks
}

// block is a request content block: text everywhere; tool_use
// and thinking in assistant turns, tool_result and image in user turns.
type block struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result: content is a string or a list of text blocks.
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// thinking; the signature is ours or another server's, and unchecked.
	Thinking *string `json:"thinking"`
	// image: its source; image is the decoded file (readBlocks), or nil
	// until imageURL's is fetched.
	Source   *imageSource `json:"source"`
	image    []byte
	imageURL string

	CacheControl *cacheControl `json:"cache_control"`
}

// cacheControl marks a cache breakpoint: the prompt up to and
// including the block that carries it is to be kept for TTL.
type cacheControl struct {
	Type string `json:"type"` // "ephemeral"
	TTL  string `json:"ttl"`  // "5m" (default) or "1h"
}

// tool is a tool definition: a client tool (type absent or
// "custom") with its input schema, or one of Anthropic's server tools
// (web_search_…, bash_…, text_editor_…), which only Anthropic can run.
type tool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control"`
}

type toolChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type thinkingConfig struct {
	Type         string `json:"type"` // enabled, disabled, adaptive
	BudgetTokens *int   `json:"budget_tokens"`
	Display      string `json:"display"` // summarized (default) or omitted
}

// outBlock is a response content block: text, thinking (with its
// signature) or tool_use. Each type's fields are present and the others'
// absent, as the SDKs' unions read them.
type outBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

type response struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"` // "message"
	Role         string     `json:"role"` // "assistant"
	Model        string     `json:"model"`
	Content      []outBlock `json:"content"`
	StopReason   *string    `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        usage      `json:"usage"`
}

// The streaming events, each sent as "event: <type>" with its JSON.

type messageStart struct {
	Type    string   `json:"type"`
	Message response `json:"message"`
}

type blockStart struct {
	Type         string   `json:"type"`
	Index        int      `json:"index"`
	ContentBlock outBlock `json:"content_block"`
}

// deltaBody is a content_block_delta's delta: text_delta (text),
// thinking_delta (thinking), signature_delta (signature) or
// input_json_delta (partial_json).
type deltaBody struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type blockDelta struct {
	Type  string    `json:"type"`
	Index int       `json:"index"`
	Delta deltaBody `json:"delta"`
}

type blockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type stopDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type messageDelta struct {
	Type  string    `json:"type"`
	Delta stopDelta `json:"delta"`
	Usage usage     `json:"usage"`
}

type event struct {
	Type string `json:"type"`
}
