package llamacpp

import (
	"encoding/json"

	"superfluid/engine"
	"superfluid/http/wire"
)

// completionRequest is the body of /completion and /infill: llama.cpp's
// completion parameters, with /infill's own fields beside them. Optional
// scalars are pointers so that "absent" takes llama.cpp's default.
type completionRequest struct {
	Prompt           json.RawMessage `json:"prompt"`
	NPredict         *int            `json:"n_predict"`
	MaxTokens        *int            `json:"max_tokens"` // llama.cpp's alias of n_predict
	Temperature      *float64        `json:"temperature"`
	TopK             *int            `json:"top_k"`
	TopP             *float64        `json:"top_p"`
	MinP             *float64        `json:"min_p"`
	RepeatPenalty    *float64        `json:"repeat_penalty"`
	RepeatLastN      *int            `json:"repeat_last_n"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	Seed             *int64          `json:"seed"`
	Stop             json.RawMessage `json:"stop"`
	Stream           bool            `json:"stream"`
	CachePrompt      *bool           `json:"cache_prompt"`
	NProbs           int             `json:"n_probs"`
	LogitBias        json.RawMessage `json:"logit_bias"`
	Samplers         json.RawMessage `json:"samplers"`
	TMaxPredictMS    int64           `json:"t_max_predict_ms"`
	TMaxPromptMS     int64           `json:"t_max_prompt_ms"`
	ResponseFields   []string        `json:"response_fields"`
	IDSlot           *int            `json:"id_slot"`
	IgnoreEOS        bool            `json:"ignore_eos"`
	ReturnTokens     bool            `json:"return_tokens"`
	NIndent          int             `json:"n_indent"`
	Model            string          `json:"model"`

	// /infill: the text around the cursor and other files of the project;
	// prompt is then the text typed after the prefix.
	InputPrefix string      `json:"input_prefix"`
	InputSuffix string      `json:"input_suffix"`
	InputExtra  []extraFile `json:"input_extra"`

	// Structured output: response_format, json_schema, grammar.
	structuredFields
	// What the server does not honour, decoded to be refused by name.
	llamaUnhonoured
}

// The wire field sets completionRequest embeds, under unexported names: a
// field embedded under an exported type's name would put that name in
// encoding/json's error paths ("StructuredFields.grammar"), where clients
// are told the field's own name.
type (
	structuredFields = wire.StructuredFields
	llamaUnhonoured  = wire.LlamaUnhonoured
)

// extraFile is one input_extra chunk. Editors send more ("time"), which
// is ignored.
type extraFile struct {
	Filename string  `json:"filename"`
	Text     *string `json:"text"`
}

// tokenProb is one generated token in completion_probabilities.
type tokenProb struct {
	ID          engine.Token `json:"id"`
	Token       string       `json:"token"`
	Bytes       []int        `json:"bytes"`
	Logprob     float64      `json:"logprob"`
	TopLogprobs []altProb    `json:"top_logprobs"`
}

// altProb is one of the most likely tokens at a step.
type altProb struct {
	ID      engine.Token `json:"id"`
	Token   string       `json:"token"`
	Bytes   []int        `json:"bytes"`
	Logprob float64      `json:"logprob"`
}

// completionResult is a finished completion as /completion and /infill return
// it (and the last event of a stream).
type completionResult struct {
	Index              int            `json:"index"`
	Content            string         `json:"content"`
	Tokens             []engine.Token `json:"tokens"`
	IDSlot             int            `json:"id_slot"`
	Stop               bool           `json:"stop"`
	Model              string         `json:"model"`
	TokensPredicted    int            `json:"tokens_predicted"`
	TokensEvaluated    int            `json:"tokens_evaluated"`
	GenerationSettings Settings       `json:"generation_settings"`
	Prompt             string         `json:"prompt"`
	HasNewLine         bool           `json:"has_new_line"`
	Truncated          bool           `json:"truncated"`
	StopType           string         `json:"stop_type"`
	StoppingWord       string         `json:"stopping_word"`
	TokensCached       int            `json:"tokens_cached"`
	Timings            wire.Timings   `json:"timings"`
	Probs              []tokenProb    `json:"completion_probabilities,omitempty"`
}

// partialResult is one streamed event before the last.
type partialResult struct {
	Index           int            `json:"index"`
	Content         string         `json:"content"`
	Tokens          []engine.Token `json:"tokens"`
	Stop            bool           `json:"stop"`
	IDSlot          int            `json:"id_slot"`
	TokensPredicted int            `json:"tokens_predicted"`
	TokensEvaluated int            `json:"tokens_evaluated"`
	Probs           []tokenProb    `json:"completion_probabilities,omitempty"`
}
