package http

import "encoding/json"

// The Anthropic Messages API bodies, as the official SDKs send and read
// them. Fields the server cannot honour are decoded so that a request using
// them is refused by name; the rest of the API's many optional fields
// (metadata, service_tier, container …) are accepted and ignored by
// encoding/json.

type anthropicRequest struct {
	Model         string             `json:"model"`
	System        json.RawMessage    `json:"system"` // a string or an array of text blocks
	Messages      []anthropicMessage `json:"messages"`
	MaxTokens     *int               `json:"max_tokens"`
	StopSequences []string           `json:"stop_sequences"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Stream        bool               `json:"stream"`
	Tools         json.RawMessage    `json:"tools"`       // see anthropicTool
	ToolChoice    json.RawMessage    `json:"tool_choice"` // see anthropicToolChoice
	MCPServers    json.RawMessage    `json:"mcp_servers"`
	OutputConfig  *struct {
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"` // the structured-outputs beta's spelling
	// Thinking turns the template's reasoning on or off; see
	// anthropicThinking.
	Thinking json.RawMessage `json:"thinking"`
	// CacheControl is the request-level breakpoint ("automatic caching"):
	// the whole prompt is the marked prefix.
	CacheControl *anthropicCacheControl `json:"cache_control"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of content blocks
}

// anthropicBlock is a request content block: text everywhere; tool_use
// and thinking in assistant turns, tool_result in user turns.
type anthropicBlock struct {
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

	CacheControl *anthropicCacheControl `json:"cache_control"`
}

// anthropicCacheControl marks a cache breakpoint: the prompt up to and
// including the block that carries it is to be kept for TTL.
type anthropicCacheControl struct {
	Type string `json:"type"` // "ephemeral"
	TTL  string `json:"ttl"`  // "5m" (default) or "1h"
}

// anthropicTool is a tool definition: a client tool (type absent or
// "custom") with its input schema, or one of Anthropic's server tools
// (web_search_…, bash_…, text_editor_…), which only Anthropic can run.
type anthropicTool struct {
	Type         string                 `json:"type"`
	Name         string                 `json:"name"`
	Description  string                 `json:"description"`
	InputSchema  json.RawMessage        `json:"input_schema"`
	CacheControl *anthropicCacheControl `json:"cache_control"`
}

type anthropicToolChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type anthropicThinking struct {
	Type         string `json:"type"` // enabled, disabled, adaptive
	BudgetTokens *int   `json:"budget_tokens"`
	Display      string `json:"display"` // summarized (default) or omitted
}

// anthropicOut is a response content block: text, thinking (with its
// signature) or tool_use. Each type's fields are present and the others'
// absent, as the SDKs' unions read them.
type anthropicOut struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

type anthropicResponse struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"` // "message"
	Role         string         `json:"role"` // "assistant"
	Model        string         `json:"model"`
	Content      []anthropicOut `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

// The streaming events, each sent as "event: <type>" with its JSON.

type anthropicMessageStart struct {
	Type    string            `json:"type"`
	Message anthropicResponse `json:"message"`
}

type anthropicBlockStart struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	ContentBlock anthropicOut `json:"content_block"`
}

// anthropicDelta is a content_block_delta's delta: text_delta (text),
// thinking_delta (thinking), signature_delta (signature) or
// input_json_delta (partial_json).
type anthropicDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type anthropicBlockDelta struct {
	Type  string         `json:"type"`
	Index int            `json:"index"`
	Delta anthropicDelta `json:"delta"`
}

type anthropicBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type anthropicStopDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type anthropicMessageDelta struct {
	Type  string             `json:"type"`
	Delta anthropicStopDelta `json:"delta"`
	Usage anthropicUsage     `json:"usage"`
}

type anthropicEvent struct {
	Type string `json:"type"`
}
