package task

import (
	"math"
	"time"

	"superfluid/engine"
)

// SamplingFields are the sampling fields the APIs share, as a request
// sent them (nil: absent). DefaultTemperature is the API's own default.
type SamplingFields struct {
	Temperature        *float64
	DefaultTemperature float64
	TopK               *int
	TopP, MinP         *float64
	Seed               *int64
	RepeatPenalty      *float64
	FrequencyPenalty   *float64
	PresencePenalty    *float64
}

// Bounds of the sampling fields. A repeat penalty divides the logits of
// tokens already seen; below MinRepeatPenalty, with the temperature
// dividing again, a logit could overflow to +inf and leave the sampler
// nothing to draw from.
const (
	MaxTemperature   = 100
	MinRepeatPenalty = 0.01
	MaxRepeatPenalty = 10
)

// Sampling builds engine sampling from the fields every API shares. Omitted
// top_k, top_p and min_p take the model's recommendation, else
// llama-server's (SamplingDefaults); an explicit value always wins. The
// result is normalized: a temperature below engine.MinTemperature (a
// denormal such as 1e-40 included) is greedy.
func Sampling(m *Model, f SamplingFields) (engine.Sampling, error) {
	s := engine.Greedy()
	def := m.Defaults()
	s.TopK, s.TopP, s.MinP = def.TopK, def.TopP, def.MinP
	t := f.DefaultTemperature
	if f.Temperature != nil {
		t = *f.Temperature
	}
	if !(t >= 0 && t <= MaxTemperature) {
		return s, BadParam("temperature", "temperature %v outside [0, %d]", t, MaxTemperature)
	}
	s.Temperature = float32(t)
	if f.TopK != nil {
		if *f.TopK < 0 {
			return s, BadParam("top_k", "top_k must not be negative")
		}
		// Past the vocabulary top_k keeps every token; clamping keeps a huge
		// one from wrapping negative in int32.
		s.TopK = int32(min(*f.TopK, math.MaxInt32))
	}
	if f.TopP != nil {
		// float32 must hold it too: 1e-50 is above 0 but rounds to it.
		if p := *f.TopP; !(p > 0 && p <= 1) || float32(p) <= 0 {
			return s, BadParam("top_p", "top_p %v outside (0, 1]", p)
		}
		s.TopP = float32(*f.TopP)
	}
	if f.MinP != nil {
		if p := *f.MinP; !(p >= 0 && p <= 1) {
			return s, BadParam("min_p", "min_p %v outside [0, 1]", p)
		}
		s.MinP = float32(*f.MinP)
	}
	if f.Seed != nil {
		s.Seed = uint64(*f.Seed)
	} else {
		s.Seed = uint64(time.Now().UnixNano())
	}
	if f.RepeatPenalty != nil {
		if p := *f.RepeatPenalty; !(p >= MinRepeatPenalty && p <= MaxRepeatPenalty) {
			return s, BadParam("repeat_penalty", "repeat_penalty %v outside [%v, %d]", p, MinRepeatPenalty, MaxRepeatPenalty)
		}
		s.RepeatPenalty = float32(*f.RepeatPenalty)
	}
	for _, p := range []struct {
		name string
		v    *float64
		dst  *float32
	}{{"frequency_penalty", f.FrequencyPenalty, &s.FrequencyPenalty}, {"presence_penalty", f.PresencePenalty, &s.PresencePenalty}} {
		if p.v == nil {
			continue
		}
		if !(*p.v >= -2 && *p.v <= 2) {
			return s, BadParam(p.name, "%s %v outside [-2, 2]", p.name, *p.v)
		}
		*p.dst = float32(*p.v)
	}
	s.Normalize()
	return s, nil
}

// SamplingDefaults are d's truncation defaults (engine's SamplingDefaults),
// each checked: a model file recommending a value the engine refuses (a
// top_p of 0, a NaN) would otherwise fail every request that omits it, so
// such a value falls back to llama-server's.
func SamplingDefaults(d *engine.Descriptor) (topK int32, topP, minP float32) {
	topK, topP, minP = d.SamplingDefaults()
	if topK < 0 {
		topK = engine.DefaultTopK
	}
	if !(topP > 0 && topP <= 1) {
		topP = engine.DefaultTopP
	}
	if !(minP >= 0 && minP <= 1) {
		minP = engine.DefaultMinP
	}
	return topK, topP, minP
}

// MaxTokens checks a requested generation limit named field; 0 or absent
// is unbounded (the context bounds it).
func MaxTokens(field string, n *int, ctxSize int) (int, error) {
	if n == nil {
		return 0, nil
	}
	if *n < 0 && *n != -1 {
		return 0, BadParam(field, "%s must not be negative", field)
	}
	if *n == -1 {
		return 0, nil // llama.cpp's "no limit"
	}
	if *n > 4*ctxSize && *n > 1<<20 {
		return 0, BadParam(field, "%s of %d is absurd for a context of %d", field, *n, ctxSize)
	}
	return *n, nil
}

// PenaltyWindow reads repeat_last_n (llama.cpp's and Ollama's): -1 is the
// whole context, 0 turns the penalties off, and a window longer than the
// context is the whole context (the engine keeps a ring of that many
// tokens per lane, so a huge one must not reach it).
func PenaltyWindow(field string, n *int, def int32, ctxSize int) (int32, error) {
	if n == nil {
		return def, nil
	}
	if *n < -1 {
		return 0, BadParam(field, "%s must be -1 (the whole context), 0 (off) or a count of tokens", field)
	}
	return int32(min(*n, ctxSize, math.MaxInt32)), nil
}

// MaxBiasEntries bounds a logit bias; more would only be a way to make a
// request expensive to check and every one of its steps slower.
const MaxBiasEntries = 4096

// CheckBias refuses a logit bias that leaves nothing to sample: with every
// token at -inf the sampler has no candidate (llama.cpp's dist sampler
// asserts on it), so such a request can only be a mistake.
func CheckBias(d *engine.Descriptor, field string, bias []engine.LogitBias) error {
	if engine.BansEveryToken(bias, d.Vocab) {
		return BadParam(field, "%s bans every token of the vocabulary: nothing could be generated", field)
	}
	return nil
}
