package responses

import (
	"encoding/json"

	"superfluid/http/wire"
)

// The Responses API's shapes (POST /v1/responses), as OpenAI documents
// them and the openai-go client decodes them.

// respRequest is the body of POST /v1/responses.
type respRequest struct {
	Model string `json:"model"`
	// Input is a string (one user message) or a list of items.
	Input              json.RawMessage   `json:"input"`
	Instructions       json.RawMessage   `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Text               *respTextConfig   `json:"text"`
	Reasoning          *respReasoningCfg `json:"reasoning"`
	PreviousResponseID string            `json:"previous_response_id"`
	// Conversation names a conversation (an id, or {"id": …}) whose items
	// come before the input and to which the turn is appended.
	Conversation json.RawMessage `json:"conversation"`
	Store        *bool           `json:"store"`
	Stream       bool            `json:"stream"`
	Metadata     json.RawMessage `json:"metadata"`
	// Fields that do not change the reply are left to encoding/json:
	// user, prompt_cache_key, safety_identifier, service_tier,
	// stream_options.
	respUnhonoured
}

// respTextConfig is "text": the answer's format and verbosity.
type respTextConfig struct {
	Format    json.RawMessage `json:"format"`
	Verbosity json.RawMessage `json:"verbosity"`
}

// respTextFormat is text.format: {"type": "text" | "json_object" |
// "json_schema", name, schema, strict} (the schema sits beside the type,
// not nested as in chat's response_format).
type respTextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// respReasoningCfg is "reasoning": {effort, summary}.
type respReasoningCfg struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// respUnhonoured are the request fields that change the reply and that
// the server cannot honour.
type respUnhonoured struct {
	Background        json.RawMessage `json:"background"`
	Prompt            json.RawMessage `json:"prompt"`
	MaxToolCalls      json.RawMessage `json:"max_tool_calls"`
	TopLogprobs       json.RawMessage `json:"top_logprobs"`
	Truncation        json.RawMessage `json:"truncation"`
	ContextManagement json.RawMessage `json:"context_management"`
	Modalities        json.RawMessage `json:"modalities"`
	Audio             json.RawMessage `json:"audio"`
	Include           json.RawMessage `json:"include"`
}

func (u *respUnhonoured) check() error {
	return wire.RefuseUnhonoured(
		wire.UnhonouredField("background", u.Background, wire.IsFalse, "responses are answered while the request waits"),
		wire.UnhonouredField("prompt", u.Prompt, nil, "this server keeps no prompt templates"),
		wire.UnhonouredField("max_tool_calls", u.MaxToolCalls, nil, "the number of calls is bounded only by parallel_tool_calls"),
		wire.UnhonouredField("top_logprobs", u.TopLogprobs, wire.NumberIs(0), "the Responses API here reports no logprobs"),
		// "auto" would drop the conversation's middle to fit the context.
		wire.UnhonouredField("truncation", u.Truncation, wire.StringIn("disabled"), "a conversation longer than the context is refused, never cut"),
		wire.UnhonouredField("context_management", u.ContextManagement, wire.EmptyValue, "the conversation is never compacted"),
		wire.UnhonouredField("modalities", u.Modalities, wire.TextOnly, wire.WhyModality),
		wire.UnhonouredField("audio", u.Audio, nil, wire.WhyModality),
		wire.UnhonouredField("include", u.Include, includesNoLogprobs, "the Responses API here reports no logprobs"),
	)
}

// includesNoLogprobs accepts an include list that does not ask for
// logprobs. The rest asks for nothing this server could add: outputs of
// hosted tools it skips, and reasoning.encrypted_content, which Codex CLI
// asks for to send reasoning back (it gets the reasoning as plain text
// instead, which it sends back just as well).
func includesNoLogprobs(raw []byte) bool {
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return false
	}
	for _, s := range list {
		if s == "message.output_text.logprobs" {
			return false
		}
	}
	return true
}

// respItemIn is one input item, any type: the fields of each type
// overlap little, and the type decides which are read.
type respItemIn struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// message
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call, function_call_output
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	// reasoning
	Summary []respTextPart `json:"summary"`
}

// respTextPart is a content part: input_text, output_text, summary_text,
// reasoning_text (and refusal, whose text is in "refusal").
type respTextPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
	// input_image: a data URL or an http(s) URL, or a file's id, and
	// the detail asked for (images.go).
	ImageURL string `json:"image_url,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// respObject is a response, as returned, streamed and stored.
type respObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"` // "response"
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"` // in_progress, completed, incomplete, failed
	CompletedAt        *int64            `json:"completed_at"`
	Error              *respError        `json:"error"`
	IncompleteDetails  *respIncomplete   `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []respItemOut     `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       *respConvRef      `json:"conversation,omitempty"`
	Reasoning          respReasoningCfg  `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	Text               respTextOut       `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	TopP               float64           `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *respUsage        `json:"usage"`
	Metadata           json.RawMessage   `json:"metadata"`
}

// respConvRef is the conversation a response continued.
type respConvRef struct {
	ID string `json:"id"`
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respTextOut struct {
	Format json.RawMessage `json:"format"`
}

type respUsage struct {
	InputTokens         int               `json:"input_tokens"`
	InputTokensDetails  respInputDetails  `json:"input_tokens_details"`
	OutputTokens        int               `json:"output_tokens"`
	OutputTokensDetails respOutputDetails `json:"output_tokens_details"`
	TotalTokens         int               `json:"total_tokens"`
}

type respInputDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type respOutputDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// respItemOut is an output item: a message, a function call or
// reasoning. The fields of the other types are left out of its JSON.
type respItemOut struct {
	ID     string
	Type   string // "message", "function_call", "reasoning"
	Status string // in_progress, completed, incomplete
	// message: output_text parts; reasoning: reasoning_text parts
	Content []respPartOut
	// function_call
	CallID, Name, Arguments string
}

// respPartOut is an output_text or reasoning_text part.
type respPartOut struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// output_text only: always empty lists.
	Annotations *[]struct{} `json:"annotations,omitempty"`
	Logprobs    *[]struct{} `json:"logprobs,omitempty"`
}

func outputText(text string) respPartOut {
	return respPartOut{Type: "output_text", Text: text, Annotations: &[]struct{}{}, Logprobs: &[]struct{}{}}
}

func reasoningText(text string) respPartOut { return respPartOut{Type: "reasoning_text", Text: text} }

func (it respItemOut) MarshalJSON() ([]byte, error) {
	content := it.Content
	if content == nil {
		content = []respPartOut{}
	}
	switch it.Type {
	case "message":
		return json.Marshal(struct {
			ID      string        `json:"id"`
			Type    string        `json:"type"`
			Status  string        `json:"status"`
			Role    string        `json:"role"`
			Content []respPartOut `json:"content"`
		}{it.ID, it.Type, it.Status, "assistant", content})
	case "function_call":
		return json.Marshal(struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Status    string `json:"status"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}{it.ID, it.Type, it.Status, it.CallID, it.Name, it.Arguments})
	default: // reasoning
		return json.Marshal(struct {
			ID      string        `json:"id"`
			Type    string        `json:"type"`
			Status  string        `json:"status"`
			Summary []respPartOut `json:"summary"`
			Content []respPartOut `json:"content"`
		}{it.ID, it.Type, it.Status, []respPartOut{}, content})
	}
}

// respEvent is one streamed event; each type sets its own fields.
type respEvent struct {
	Type           string       `json:"type"`
	SequenceNumber int          `json:"sequence_number"`
	Response       *respObject  `json:"response,omitempty"`
	OutputIndex    *int         `json:"output_index,omitempty"`
	ContentIndex   *int         `json:"content_index,omitempty"`
	ItemID         string       `json:"item_id,omitempty"`
	Item           *respItemOut `json:"item,omitempty"`
	Part           *respPartOut `json:"part,omitempty"`
	Delta          *string      `json:"delta,omitempty"`
	Text           *string      `json:"text,omitempty"`
	Arguments      *string      `json:"arguments,omitempty"`
	Name           string       `json:"name,omitempty"`
	Logprobs       *[]struct{}  `json:"logprobs,omitempty"`
}

// respDeleted answers DELETE /v1/responses/{id}.
type respDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}
