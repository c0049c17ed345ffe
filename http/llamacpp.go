package http

// The llama.cpp server's own API (tools/server in llama.cpp): /completion,
// /infill, /tokenize, /detokenize, /props and /slots, field for field as
// llama.vim, llama.vscode and llama.cpp's web UI send and read them.
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

func llamaRoutes() map[string]route {
	return map[string]route{
		"/completion": {method: "POST", kind: apiLlama, handler: (*Server).llamaCompletion},
		"/infill":     {method: "POST", kind: apiLlama, handler: (*Server).llamaInfill},
		"/tokenize":   {method: "POST", kind: apiLlama, handler: (*Server).llamaTokenize},
		"/detokenize": {method: "POST", kind: apiLlama, handler: (*Server).llamaDetokenize},
		"/props":      {method: "GET", kind: apiLlama, handler: (*Server).llamaProps},
		"/slots":      {method: "GET", kind: apiLlama, handler: (*Server).llamaSlots},
		// The prompt a chat request renders to (apply_template.go).
		"/apply-template": {method: "POST", kind: apiLlama, handler: (*Server).llamaApplyTemplate},
	}
}

// llamaSamplerChain names the samplers the engine runs, in order, as
// llama.cpp's generation_settings.samplers does.
var llamaSamplerChain = []string{"penalties", "top_k", "top_p", "min_p", "temperature"}

// llama.cpp's sampling defaults (common/common.h), which /completion and
// /infill apply to what a request leaves out; top_k, top_p and min_p come
// from the model, as on every API (samplingDefaults).
const (
	llamaDefaultTemperature = 0.8
	llamaDefaultRepeatLastN = 64
)
