package http

import (
	"math"

	"superfluid/engine"
	"superfluid/sched"
)

// unschedulable mirrors sched.Request's validation (sched/request.go):
// what the scheduler would refuse at Submit. "" when the request is fine.
func unschedulable(d *engine.Descriptor, r *sched.Request) string {
	switch {
	case len(r.Prompt) == 0 || len(r.Prompt) >= d.Ctx:
		return "prompt length"
	case int(r.Class) >= sched.NumClasses:
		return "class"
	case r.MaxTokens < 0 || int64(r.MaxTokens) > math.MaxUint32:
		return "max tokens"
	case r.Logprobs < 0 || r.Logprobs > engine.MaxLogprobs:
		return "logprobs"
	}
	for _, t := range r.Prompt {
		if t < 0 || int(t) >= d.Vocab {
			return "prompt token"
		}
	}
	for _, b := range r.Bias {
		if b.Token < 0 || int(b.Token) >= d.Vocab || math.IsNaN(float64(b.Bias)) {
			return "bias"
		}
	}
	if engine.BansEveryToken(r.Bias, d.Vocab) {
		return "bias bans every token"
	}
	s := r.Sampling
	if s == (engine.Sampling{}) {
		return ""
	}
	if s.Temperature > 0 && s.Temperature < engine.MinTemperature {
		return "temperature below engine.MinTemperature"
	}
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	if !finite(s.Temperature) || !finite(s.TopP) || !finite(s.MinP) || !finite(s.RepeatPenalty) ||
		!finite(s.FrequencyPenalty) || !finite(s.PresencePenalty) || s.TopK < 0 || s.TopP <= 0 || s.TopP > 1 ||
		s.MinP < 0 || s.MinP > 1 || s.RepeatPenalty <= 0 || s.PenaltyLastN < -1 {
		return "sampling"
	}
	return ""
}
