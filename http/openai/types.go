package openai

import (
	"encoding/json"

	"superfluid/http/wire"
)

// The OpenAI request and response bodies, field for field as the official
// clients send and read them. Optional scalars are pointers so that "absent"
// and "zero" differ (temperature 0 is greedy; absent is the API default 1).

type oaiStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaiChatRequest struct {
	Model               string             `json:"model"`
	Messages            []wire.Message     `json:"messages"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int               `json:"top_k"` // llama.cpp extension
	MinP                *float64           `json:"min_p"` // llama.cpp extension
	N                   *int               `json:"n"`
	Stream              bool               `json:"stream"`
	StreamOptions       *oaiStreamOptions  `json:"stream_options"`
	Stop                json.RawMessage    `json:"stop"`
	Seed                *int64             `json:"seed"`
	Logprobs            bool               `json:"logprobs"`
	TopLogprobs         *int               `json:"top_logprobs"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	RepeatPenalty       *float64           `json:"repeat_penalty"` // llama.cpp extension
	LogitBias           map[string]float64 `json:"logit_bias"`
	User                string             `json:"user"`
	// Tools, and what reaches the template: reasoning_effort (gpt-oss
	// reads it) and chat_template_kwargs (enable_thinking …).
	toolFields
	ReasoningEffort    *string                    `json:"reasoning_effort"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	// Structured output: response_format and llama.cpp's json_schema, grammar.
	structuredFields
	// What the server does not honour, decoded to be refused by name.
	oaiUnhonoured
}

type oaiUsage struct {
	PromptTokens        int               `json:"prompt_tokens"`
	CompletionTokens    int               `json:"completion_tokens"`
	TotalTokens         int               `json:"total_tokens"`
	PromptTokensDetails *oaiPromptDetails `json:"prompt_tokens_details,omitempty"`
}

type oaiPromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type oaiTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type oaiTokenLogprob struct {
	Token       string          `json:"token"`
	Logprob     float64         `json:"logprob"`
	Bytes       []int           `json:"bytes"`
	TopLogprobs []oaiTopLogprob `json:"top_logprobs"`
}

type oaiLogprobs struct {
	Content []oaiTokenLogprob `json:"content"`
}

type oaiChatMessage struct {
	Role string `json:"role"`
	// Content is null when the turn is only calls, as OpenAI sends it.
	Content          *string          `json:"content"`
	ReasoningContent string           `json:"reasoning_content,omitempty"`
	ToolCalls        []oaiToolCallOut `json:"tool_calls,omitempty"`
}

type oaiChatChoice struct {
	Index        int            `json:"index"`
	Message      oaiChatMessage `json:"message"`
	Logprobs     *oaiLogprobs   `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type oaiChatResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []oaiChatChoice `json:"choices"`
	Usage             oaiUsage        `json:"usage"`
}

type oaiDelta struct {
	Role             string           `json:"role,omitempty"`
	Content          *string          `json:"content,omitempty"`
	ReasoningContent *string          `json:"reasoning_content,omitempty"`
	ToolCalls        []oaiToolCallOut `json:"tool_calls,omitempty"`
}

type oaiChunkChoice struct {
	Index        int          `json:"index"`
	Delta        oaiDelta     `json:"delta"`
	Logprobs     *oaiLogprobs `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type oaiChatChunk struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	SystemFingerprint string           `json:"system_fingerprint"`
	Choices           []oaiChunkChoice `json:"choices"`
	Usage             *oaiUsage        `json:"usage,omitempty"`
	// Timings rides on the usage chunk as llama-server sends it: the
	// server's own prefill and decode rates, which a client cannot measure
	// from chunks that arrive together.
	Timings *wire.Timings `json:"timings,omitempty"`
}

type oaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
