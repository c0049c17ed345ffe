package llamacpp

import (
	"math"
	"time"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// Limits on what a llama.cpp request may ask for.
const (
	maxTimeLimitMS    = 24 * 60 * 60 * 1000 // t_max_*_ms beyond a day is a mistake
	maxResponseFields = 256
)

// completionParams is what a /completion or /infill request asks for beyond its
// prompt, checked, with llama.cpp's defaults applied.
type completionParams struct {
	maxTokens  int  // 0: until the context is full
	warmup     bool // n_predict 0: evaluate the prompt into the cache only
	sampling   engine.Sampling
	stops      []string
	bias       []engine.LogitBias
	nProbs     int
	nIndent    int
	maxPrompt  time.Duration // t_max_prompt_ms; 0: none
	maxPredict time.Duration // t_max_predict_ms; 0: none
	fields     []string      // response_fields; nil: all
	lora       []float32     // the LoRA adapter scales; nil: none
	grammar    *engine.GrammarSpec
	grammarAt  string // the field the grammar came from
	stream     bool
	wantTokens bool // return_tokens
	settings   Settings
}

// readParams checks a request's parameters (not its prompt).
func readParams(m *task.Model, req *completionRequest) (*completionParams, error) {
	if err := req.llamaUnhonoured.Check(); err != nil {
		return nil, err
	}
	n, field := req.NPredict, "n_predict"
	if n == nil && req.MaxTokens != nil {
		n, field = req.MaxTokens, "max_tokens"
	}
	limit, err := task.MaxTokens(field, n, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	p := &completionParams{maxTokens: limit, warmup: n != nil && *n == 0, stream: req.Stream, wantTokens: req.ReturnTokens, nIndent: req.NIndent}
	if p.lora, err = req.LoRAField.Scales(m); err != nil {
		return nil, err
	}
	if p.sampling, err = samplingOf(m, req); err != nil {
		return nil, err
	}
	if p.stops, err = wire.StopList(req.Stop, "stop"); err != nil {
		return nil, err
	}
	if p.bias, err = parseBias(m, req.LogitBias); err != nil {
		return nil, err
	}
	if req.IgnoreEOS {
		for _, t := range m.Desc.EOG {
			p.bias = append(p.bias, engine.LogitBias{Token: t, Bias: float32(math.Inf(-1))})
		}
	}
	// After ignore_eos: its bans count towards leaving nothing to sample.
	if err := task.CheckBias(m.Desc, "logit_bias", p.bias); err != nil {
		return nil, err
	}
	if req.NProbs < 0 || req.NProbs > engine.MaxLogprobs {
		return nil, wire.BadParam("n_probs", "n_probs must be between 0 and %d", engine.MaxLogprobs)
	}
	p.nProbs = req.NProbs
	if err := checkSamplers(req.Samplers); err != nil {
		return nil, err
	}
	if p.maxPrompt, err = timeLimit(req.TMaxPromptMS, "t_max_prompt_ms"); err != nil {
		return nil, err
	}
	if p.maxPredict, err = timeLimit(req.TMaxPredictMS, "t_max_predict_ms"); err != nil {
		return nil, err
	}
	shape, err := req.structuredFields.Constraint(m)
	if err != nil {
		return nil, err
	}
	// /completion and /infill prompts are the client's text, not a
	// rendered conversation: no reasoning block to wait for.
	if p.grammar, err = task.GrammarFor(m, shape, nil, false); err != nil {
		return nil, err
	}
	p.grammarAt = shape.Field
	if len(req.ResponseFields) > maxResponseFields {
		return nil, wire.BadParam("response_fields", "at most %d response_fields", maxResponseFields)
	}
	if len(req.ResponseFields) > 0 { // an empty list means every field, as in llama.cpp
		p.fields = req.ResponseFields
	}
	p.settings = settingsOf(m, req, p)
	return p, nil
}

// samplingOf applies llama.cpp's conventions: a negative temperature
// is greedy, seed -1 (or its unsigned 32-bit form) is random, and omitted
// top_k, top_p and min_p take the model's defaults like every other API's
// (llama-server's 40, 0.95 and 0.05 unless the GGUF recommends others).
func samplingOf(m *task.Model, req *completionRequest) (engine.Sampling, error) {
	temp := req.Temperature
	if temp != nil && *temp < 0 {
		greedy := 0.0
		temp = &greedy
	}
	seed := req.Seed
	if seed != nil && (*seed == -1 || *seed == math.MaxUint32) {
		seed = nil
	}
	if seed != nil && *seed < 0 {
		return engine.Sampling{}, wire.BadParam("seed", "seed must be -1 (random) or a non-negative number")
	}
	s, err := task.Sampling(m, task.SamplingFields{Temperature: temp, DefaultTemperature: DefaultTemperature, TopK: req.TopK, TopP: req.TopP, MinP: req.MinP,
		Seed: seed, RepeatPenalty: req.RepeatPenalty, FrequencyPenalty: req.FrequencyPenalty, PresencePenalty: req.PresencePenalty})
	if err != nil {
		return s, err
	}
	s.PenaltyLastN, err = task.PenaltyWindow("repeat_last_n", req.RepeatLastN, DefaultRepeatLastN, m.Desc.Ctx)
	return s, err
}

// timeLimit reads a t_max_*_ms field; zero or negative disables it, as in
// llama.cpp.
func timeLimit(ms int64, field string) (time.Duration, error) {
	if ms <= 0 {
		return 0, nil
	}
	if ms > maxTimeLimitMS {
		return 0, wire.BadParam(field, "%s of %d ms is absurd", field, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// settingsOf is the generation_settings a request runs with.
func settingsOf(m *task.Model, req *completionRequest, p *completionParams) Settings {
	nPredict := -1
	if p.maxTokens > 0 {
		nPredict = p.maxTokens
	} else if p.warmup {
		nPredict = 0
	}
	s := DefaultSettings(m)
	s.NPredict, s.MaxTokens = nPredict, nPredict
	s.Seed = p.sampling.Seed
	s.Temperature, s.TopK, s.TopP, s.MinP = p.sampling.Temperature, p.sampling.TopK, p.sampling.TopP, p.sampling.MinP
	s.RepeatLastN, s.RepeatPenalty = p.sampling.PenaltyLastN, p.sampling.RepeatPenalty
	s.PresencePenalty, s.FrequencyPenalty = p.sampling.PresencePenalty, p.sampling.FrequencyPenalty
	if p.stops != nil {
		s.Stop = p.stops
	}
	s.IgnoreEOS, s.Stream, s.NProbs, s.NIndent = req.IgnoreEOS, p.stream, p.nProbs, p.nIndent
	s.TMaxPromptMS, s.TMaxPredictMS = p.maxPrompt.Milliseconds(), p.maxPredict.Milliseconds()
	s.LogitBias = biasSettings(p.bias)
	s.LoRA = loraSettings(m, m.LoRA.Resolve(p.lora))
	return s
}

// promptJob is one prompt of a request, ready to submit.
type promptJob struct {
	index     int
	spec      *task.Spec
	truncated bool   // the FIM prompt builder left part of the input out
	cacheKey  string // "": the answer may not come from the completion cache
}

// newJob makes the generation of one prompt. The warm-up generates a
// single greedy token that is thrown away: the engine must sample once to
// finish the prefill, and the sequence it leaves in the cache holds the
// prompt only.
func (p *completionParams) newJob(index int, prompt []engine.Token, class sched.Class) *promptJob {
	g := &task.Spec{Prompt: prompt, Class: class, MaxTokens: p.maxTokens, Sampling: p.sampling, Stop: p.stops, Bias: p.bias,
		Grammar: p.grammar, GrammarField: p.grammarAt, LoRA: p.lora}
	if p.warmup {
		g.Grammar = nil
		g.MaxTokens, g.Sampling, g.Stop, g.Bias = 1, engine.Greedy(), nil, nil
	} else if p.nProbs > 0 {
		g.Logprobs, g.TopLogprobs = p.nProbs, p.nProbs
	}
	return &promptJob{index: index, spec: g}
}
