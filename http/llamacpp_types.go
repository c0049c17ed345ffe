package http

import (
	"encoding/json"

	"superfluid/engine"
	"superfluid/http/llamacpp"
)

// llamaRequest is the body of /completion and /infill: llama.cpp's
// completion parameters, with /infill's own fields beside them. Optional
// scalars are pointers so that "absent" takes llama.cpp's default.
type llamaRequest struct {
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
	InputPrefix string       `json:"input_prefix"`
	InputSuffix string       `json:"input_suffix"`
	InputExtra  []llamaExtra `json:"input_extra"`

	// Structured output: response_format, json_schema, grammar.
	structuredFields
	// What the server does not honour, decoded to be refused by name.
	llamaUnhonoured
}

// llamaExtra is one input_extra chunk. Editors send more ("time"), which
// is ignored.
type llamaExtra struct {
	Filename string  `json:"filename"`
	Text     *string `json:"text"`
}

// llamaTimings is llama.cpp's timings object.
type llamaTimings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	// Speculative decoding's draft tokens and those accepted, present (as
	// llama-server has them) only when the request carried drafts.
	DraftN         int  `json:"draft_n,omitempty"`
	DraftNAccepted *int `json:"draft_n_accepted,omitempty"`
}

// newLlamaTimings fills in the rates llama.cpp derives; a phase that did
// no work reports zero rather than a division by zero.
func newLlamaTimings(cached, promptN int, promptMS float64, predictedN int, predictedMS float64) llamaTimings {
	t := llamaTimings{CacheN: cached, PromptN: promptN, PromptMS: promptMS, PredictedN: predictedN, PredictedMS: predictedMS}
	if promptN > 0 && promptMS > 0 {
		t.PromptPerTokenMS = promptMS / float64(promptN)
		t.PromptPerSecond = 1000 * float64(promptN) / promptMS
	}
	if predictedN > 0 && predictedMS > 0 {
		t.PredictedPerTokenMS = predictedMS / float64(predictedN)
		t.PredictedPerSecond = 1000 * float64(predictedN) / predictedMS
	}
	return t
}

// llamaProb is one generated token in completion_probabilities.
type llamaProb struct {
	ID          engine.Token `json:"id"`
	Token       string       `json:"token"`
	Bytes       []int        `json:"bytes"`
	Logprob     float64      `json:"logprob"`
	TopLogprobs []llamaAlt   `json:"top_logprobs"`
}

// llamaAlt is one of the most likely tokens at a step.
type llamaAlt struct {
	ID      engine.Token `json:"id"`
	Token   string       `json:"token"`
	Bytes   []int        `json:"bytes"`
	Logprob float64      `json:"logprob"`
}

// llamaResult is a finished completion as /completion and /infill return
// it (and the last event of a stream).
type llamaResult struct {
	Index              int            `json:"index"`
	Content            string         `json:"content"`
	Tokens             []engine.Token `json:"tokens"`
	IDSlot             int            `json:"id_slot"`
	Stop               bool           `json:"stop"`
	Model              string         `json:"model"`
	TokensPredicted    int            `json:"tokens_predicted"`
	TokensEvaluated    int            `json:"tokens_evaluated"`
	GenerationSettings llamaSettings  `json:"generation_settings"`
	Prompt             string         `json:"prompt"`
	HasNewLine         bool           `json:"has_new_line"`
	Truncated          bool           `json:"truncated"`
	StopType           string         `json:"stop_type"`
	StoppingWord       string         `json:"stopping_word"`
	TokensCached       int            `json:"tokens_cached"`
	Timings            llamaTimings   `json:"timings"`
	Probs              []llamaProb    `json:"completion_probabilities,omitempty"`
}

// llamaPartial is one streamed event before the last.
type llamaPartial struct {
	Index           int            `json:"index"`
	Content         string         `json:"content"`
	Tokens          []engine.Token `json:"tokens"`
	Stop            bool           `json:"stop"`
	IDSlot          int            `json:"id_slot"`
	TokensPredicted int            `json:"tokens_predicted"`
	TokensEvaluated int            `json:"tokens_evaluated"`
	Probs           []llamaProb    `json:"completion_probabilities,omitempty"`
}

// The llama.cpp API's generation settings and defaults are its package's
// (superfluid/http/llamacpp); /completion and /infill report them too.
type llamaSettings = llamacpp.Settings

const (
	llamaDefaultTemperature = llamacpp.DefaultTemperature
	llamaDefaultRepeatLastN = llamacpp.DefaultRepeatLastN
)

func llamaDefaultSettings(m *Model) llamaSettings { return llamacpp.DefaultSettings(&m.Model) }
