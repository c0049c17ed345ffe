package http

import "encoding/json"

// The Anthropic Messages API bodies, as the official SDKs send and read
// them. Fields the server cannot honour are decoded so that a request using
// them is refused by name; the rest of the API's many optional fields
// (metadata, service_tier, cache_control, container …) are accepted and
// ignored by encoding/json.

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
	Tools         json.RawMessage    `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
	MCPServers    json.RawMessage    `json:"mcp_servers"`
	OutputConfig  *struct {
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"` // the structured-outputs beta's spelling
	// Thinking asks for thinking blocks in the reply, which the server does
	// not produce (it does not separate reasoning from the answer).
	Thinking json.RawMessage `json:"thinking"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of content blocks
}

// anthropicBlock is a request content block; only "text" is served.
type anthropicBlock struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

type anthropicText struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

type anthropicResponse struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"` // "message"
	Role         string          `json:"role"` // "assistant"
	Model        string          `json:"model"`
	Content      []anthropicText `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        anthropicUsage  `json:"usage"`
}

// The streaming events, each sent as "event: <type>" with its JSON.

type anthropicMessageStart struct {
	Type    string            `json:"type"`
	Message anthropicResponse `json:"message"`
}

type anthropicBlockStart struct {
	Type         string        `json:"type"`
	Index        int           `json:"index"`
	ContentBlock anthropicText `json:"content_block"`
}

type anthropicTextDelta struct {
	Type string `json:"type"` // "text_delta"
	Text string `json:"text"`
}

type anthropicBlockDelta struct {
	Type  string             `json:"type"`
	Index int                `json:"index"`
	Delta anthropicTextDelta `json:"delta"`
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
