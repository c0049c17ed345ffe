package tasktest

import (
	"math"
	"testing"

	"superfluid/engine"
	"superfluid/sched"
	"superfluid/task"
)

// CheckSpec checks what a validated request hands to the scheduler: a
// prompt of the model's tokens that fits the context with room left, and
// limits and sampling the scheduler accepts.
func CheckSpec(t *testing.T, m *task.Model, g *task.Request) {
	t.Helper()
	checkPrompt(t, m, g.Prompt)
	s := g.Sampling
	if g.MaxTokens < 0 || int64(g.MaxTokens) > math.MaxUint32 || int(g.Class) >= sched.NumClasses || g.Logprobs < 0 || g.Logprobs > engine.MaxLogprobs ||
		s.Temperature < 0 || s.TopK < 0 || s.TopP <= 0 || s.TopP > 1 || s.MinP < 0 || s.MinP > 1 || s.RepeatPenalty <= 0 || s.PenaltyLastN < -1 {
		t.Fatalf("spec the scheduler would refuse: %+v", g)
	}
	if msg := Unschedulable(m.Desc, &sched.Request{Prompt: g.Prompt, Class: g.Class, MaxTokens: g.MaxTokens, Sampling: g.Sampling, Logprobs: g.Logprobs, Bias: g.Bias}); msg != "" {
		t.Fatalf("spec the scheduler would refuse (%s): %+v", msg, g)
	}
}

// Unschedulable mirrors sched.Request's validation (sched/request.go):
// what the scheduler would refuse at Submit. "" when the request is fine.
func Unschedulable(d *engine.Descriptor, r *sched.Request) string {
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

// CheckAccepted checks what a decoder hands on for a choice it would
// submit: a prompt of the model's tokens that fits the context, limits in
// range, and nothing the scheduler refuses.
func CheckAccepted(t *testing.T, m *task.Model, g *task.Spec) {
	t.Helper()
	checkPrompt(t, m, g.Prompt)
	if g.MaxTokens < 0 || g.Logprobs < 0 || g.Logprobs > 20 {
		t.Fatalf("accepted limits %+v", g)
	}
	if msg := Unschedulable(m.Desc, &sched.Request{Prompt: g.Prompt, Class: g.Class, MaxTokens: g.MaxTokens, Sampling: g.Sampling, Logprobs: g.Logprobs, Bias: g.Bias}); msg != "" {
		t.Fatalf("accepted what the scheduler refuses (%s): %+v", msg, g)
	}
}

// checkPrompt checks that a prompt is of the model's tokens and fits its
// context with room left.
func checkPrompt(t *testing.T, m *task.Model, prompt []engine.Token) {
	t.Helper()
	if len(prompt) == 0 || len(prompt) >= m.Desc.Ctx {
		t.Fatalf("prompt of %d tokens for a context of %d", len(prompt), m.Desc.Ctx)
	}
	for _, tok := range prompt {
		if tok < 0 || int(tok) >= m.Desc.Vocab {
			t.Fatalf("prompt token %d outside the vocabulary", tok)
		}
	}
}
