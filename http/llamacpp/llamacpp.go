// Package llamacpp is the llama.cpp server's own API (tools/server in
// llama.cpp): /completion, /infill, /embedding(s), /apply-template,
// /tokenize, /detokenize, /props and /slots, field for field as llama.vim, llama.vscode and llama.cpp's web
// UI send and read them. It is the model for every API package: it imports
// task, http/wire and leaf packages only, and its handlers decode a
// request, hand it to the core and render what comes back.
//
// Where superfluid differs from llama-server it is because one scheduler
// with a shared prefix cache stands where llama-server has slots:
//
//   - cache_prompt is accepted and always true: every admission is seeded
//     from the longest cached prefix, whoever computed it.
//   - id_slot is accepted and ignored: a request takes whichever lane is
//     free and finds its prefix in the shared cache wherever it was made;
//     responses report id_slot -1 ("no fixed slot").
//   - samplers is accepted (an array of names, or llama.cpp's letter
//     string) and checked for type, but the chain is fixed: logit bias,
//     penalties, top_k, top_p, min_p, temperature, then the draw. Every
//     parameter sent applies; naming or omitting a sampler changes nothing.
//     generation_settings reports the chain that ran. ("infill", which
//     llama.vim and llama.vscode name, is llama.cpp's FIM-specific merge of
//     same-prefix candidates; it is not run.)
//   - t_max_prompt_ms, which llama.cpp leaves unimplemented, bounds the
//     time to the first token: a request that has produced none by then
//     ends with empty content and stop_type "limit". What it prefilled
//     stays in the prefix cache, so the editor's next request continues
//     from there. The n_predict: 0 warm-up ignores it (llama.vim sends it
//     with t_max_prompt_ms 1: honouring that would make warm-ups useless).
//   - t_max_predict_ms follows llama.cpp — once the time since the first
//     token passes it, the completion ends after the next newline — and is
//     also a hard bound at twice the limit, since a model that never ends a
//     line would otherwise run to n_predict long after the editor gave up.
//   - n_predict: 0 evaluates the prompt into the cache and returns at once
//     (the warm-up llama.vim and llama.vscode send for their extra context).
//   - A prompt past the context is refused (400) rather than truncated.
//   - /infill answers identical greedy, non-streaming requests from the
//     completion cache: such an answer reports no prompt or predicted work
//     and tokens_cached equal to the whole prompt.
package llamacpp

import (
	"math"

	"superfluid/http/wire"
	"superfluid/task"
)

// api is llamacpp's handlers over the server that mounts them.
type api struct{ host wire.Host }

// Routes are the llama.cpp API's routes on h.
func Routes(h wire.Host) []wire.Route {
	a := &api{host: h}
	return []wire.Route{
		{Method: "POST", Path: "/completion", API: wire.Llama, Handle: a.completion, Generates: true},
		{Method: "POST", Path: "/infill", API: wire.Llama, Handle: a.infill, Generates: true},
		// The prompt a chat request renders to.
		{Method: "POST", Path: "/apply-template", API: wire.Llama, Handle: a.applyTemplate},
		{Method: "POST", Path: "/embedding", API: wire.Llama, Handle: a.embeddings, Embeds: true},
		{Method: "POST", Path: "/embeddings", API: wire.Llama, Handle: a.embeddings, Embeds: true},
		{Method: "POST", Path: "/tokenize", API: wire.Llama, Handle: a.tokenize},
		{Method: "POST", Path: "/detokenize", API: wire.Llama, Handle: a.detokenize},
		{Method: "GET", Path: "/props", API: wire.Llama, Handle: a.props},
		{Method: "GET", Path: "/slots", API: wire.Llama, Handle: a.slots},
		{Method: "GET", Path: "/lora-adapters", API: wire.Llama, Handle: a.loraAdapters},
		{Method: "POST", Path: "/lora-adapters", API: wire.Llama, Handle: a.setLoRAAdapters, Body: wire.BodyControl},
	}
}

// SamplerChain names the samplers the engine runs, in order, as
// llama.cpp's generation_settings.samplers does.
var SamplerChain = []string{"penalties", "top_k", "top_p", "min_p", "temperature"}

// llama.cpp's sampling defaults (common/common.h), which /completion and
// /infill apply to what a request leaves out; top_k, top_p and min_p come
// from the model, as on every API (task.Model.Defaults).
const (
	DefaultTemperature = 0.8
	DefaultRepeatLastN = 64
)

// Settings is generation_settings: the parameters a completion ran with
// after defaults and checks (and /props' defaults).
type Settings struct {
	NCtx             int      `json:"n_ctx"`
	Model            string   `json:"model"`
	NPredict         int      `json:"n_predict"`
	Seed             uint64   `json:"seed"`
	Temperature      float32  `json:"temperature"`
	TopK             int32    `json:"top_k"`
	TopP             float32  `json:"top_p"`
	MinP             float32  `json:"min_p"`
	RepeatLastN      int32    `json:"repeat_last_n"`
	RepeatPenalty    float32  `json:"repeat_penalty"`
	PresencePenalty  float32  `json:"presence_penalty"`
	FrequencyPenalty float32  `json:"frequency_penalty"`
	Stop             []string `json:"stop"`
	MaxTokens        int      `json:"max_tokens"`
	NKeep            int      `json:"n_keep"`
	IgnoreEOS        bool     `json:"ignore_eos"`
	Stream           bool     `json:"stream"`
	NProbs           int      `json:"n_probs"`
	NIndent          int      `json:"n_indent"`
	TMaxPromptMS     int64    `json:"t_max_prompt_ms"`
	TMaxPredictMS    int64    `json:"t_max_predict_ms"`
	CachePrompt      bool     `json:"cache_prompt"`
	LogitBias        [][2]any `json:"logit_bias"`
	Samplers         []string `json:"samplers"`
	// LoRA is every loaded adapter at the scale the request runs it at
	// ([] for a model with none), in llama-server's params shape.
	LoRA []LoRAScale `json:"lora"`
}

// LoRAScale is one adapter's id and scale.
type LoRAScale struct {
	ID    int     `json:"id"`
	Scale float32 `json:"scale"`
}

// loraSettings lists m's adapters at scales (nil: every one at 0).
func loraSettings(m *task.Model, scales []float32) []LoRAScale {
	out := []LoRAScale{}
	if m.LoRA == nil {
		return out
	}
	for _, a := range m.LoRA.List() {
		s := float32(0)
		if a.ID < len(scales) {
			s = scales[a.ID]
		}
		out = append(out, LoRAScale{ID: a.ID, Scale: s})
	}
	return out
}

// DefaultSettings is what a request that sets nothing runs with (/props'
// default_generation_settings).
func DefaultSettings(m *task.Model) Settings {
	d := m.Defaults()
	return Settings{
		NCtx: m.Desc.Ctx, Model: m.Name, NPredict: -1, Seed: math.MaxUint32,
		Temperature: DefaultTemperature, TopK: d.TopK, TopP: d.TopP, MinP: d.MinP,
		RepeatLastN: DefaultRepeatLastN, RepeatPenalty: 1, Stop: []string{}, MaxTokens: -1,
		CachePrompt: true, LogitBias: [][2]any{}, Samplers: SamplerChain,
		LoRA: loraSettings(m, m.LoRA.Resolve(nil)),
	}
}
