package wire

// Timings is llama.cpp's timings object: /completion's, and the last
// chunk of a streamed OpenAI chat with usage (as llama-server sends it),
// which the web page reads its speed from.
type Timings struct {
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

// NewTimings fills in the rates llama.cpp derives; a phase that did
// no work reports zero rather than a division by zero.
func NewTimings(cached, promptN int, promptMS float64, predictedN int, predictedMS float64) Timings {
	t := Timings{CacheN: cached, PromptN: promptN, PromptMS: promptMS, PredictedN: predictedN, PredictedMS: predictedMS}
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
