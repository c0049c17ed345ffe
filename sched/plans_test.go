package sched

import (
	"math"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// The CPU default batch is 64 tokens a step. These workloads once made
// plans whose first step passed it: each Chat/FIM lane grew the tick's
// prefill to a whole chunk without counting what the lanes before it had
// taken, and the engine refused the tick.
func TestPlansFitABatchOf64(t *testing.T) {
	cases := map[string]func(h *harness) map[string]Request{
		"fim under four background prompts": func(h *harness) map[string]Request {
			reqs := map[string]Request{}
			for i, name := range []string{"bg1", "bg2", "bg3", "bg4"} {
				reqs[name] = Request{Prompt: promptOf(10+i, 2000), Class: Background, MaxTokens: 16}
				h.submit(name, reqs[name])
			}
			h.step()
			h.step()
			reqs["fim"] = Request{Prompt: promptOf(20, 1000), Class: FIM, MaxTokens: 24}
			h.submit("fim", reqs["fim"])
			return reqs
		},
		"chat n=3 over a 200-token prompt": func(h *harness) map[string]Request {
			reqs := map[string]Request{}
			prompt := promptOf(30, 200)
			for _, name := range []string{"c0", "c1", "c2"} {
				reqs[name] = Request{Prompt: prompt, Class: Chat, MaxTokens: 20}
				h.submit(name, reqs[name])
			}
			return reqs
		},
		"two fim requests at once": func(h *harness) map[string]Request {
			reqs := map[string]Request{
				"f1": {Prompt: promptOf(40, 150), Class: FIM, MaxTokens: 12},
				"f2": {Prompt: promptOf(41, 90), Class: FIM, MaxTokens: 12},
			}
			h.submit("f1", reqs["f1"])
			h.submit("f2", reqs["f2"])
			return reqs
		},
	}
	for name, load := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 8, 64, Config{})
			reqs := load(h)
			h.run(5000)
			if len(h.eng.Refusals) > 0 {
				t.Fatalf("the engine refused %d plans, the first: %v", len(h.eng.Refusals), h.eng.Refusals[0])
			}
			for name, req := range reqs {
				if r := h.result(name); r.Err != nil {
					t.Fatalf("%s: %v", name, r.Err)
				}
				h.expectOutput(name, req)
			}
		})
	}
}

// Whatever Submit takes, the engine takes: requests at the edges of what
// is allowed run without a refused plan.
func TestWhatSubmitTakesTheEngineTakes(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	sampled := func(s engine.Sampling) engine.Sampling {
		if s.TopP == 0 {
			s.TopP = 1
		}
		if s.RepeatPenalty == 0 {
			s.RepeatPenalty = 1
		}
		return s
	}
	almostAll := banAll()[1:]
	reqs := map[string]Request{
		"denormal temperature": {Sampling: sampled(engine.Sampling{Temperature: 1e-40})},
		"negative temperature": {Sampling: sampled(engine.Sampling{Temperature: -3})},
		"huge temperature":     {Sampling: sampled(engine.Sampling{Temperature: 3e38})},
		"penalties at bounds":  {Sampling: sampled(engine.Sampling{Temperature: 1, FrequencyPenalty: 1e6, PresencePenalty: -1e6, PenaltyLastN: -1})},
		"tiny repeat penalty":  {Sampling: sampled(engine.Sampling{Temperature: 1, RepeatPenalty: 1e-30})},
		"edges of top/min p":   {Sampling: sampled(engine.Sampling{Temperature: 1, TopP: 1e-30, MinP: 1, TopK: math.MaxInt32})},
		"infinite biases":      {Bias: []engine.LogitBias{{Token: 5, Bias: inf}, {Token: 6, Bias: -inf}}},
		"all but one banned":   {Bias: almostAll, Sampling: sampled(engine.Sampling{Temperature: 0.7})},
		"max logprobs":         {Logprobs: engine.MaxLogprobs},
	}
	h := newHarness(t, 4, 64, Config{}).fast()
	for name, req := range reqs {
		req.Prompt = promptOf(len(name), 70)
		req.MaxTokens = 5
		reqs[name] = req
		h.submit(name, req)
	}
	if err := (&Request{Prompt: []engine.Token{5}, Sampling: sampled(engine.Sampling{Temperature: nan})}).validate(h.eng.Descriptor()); err == nil {
		t.Error("a NaN temperature was taken")
	}
	h.run(1000)
	if len(h.eng.Refusals) > 0 {
		t.Fatalf("the engine refused %d plans; the first: %v", len(h.eng.Refusals), h.eng.Refusals[0])
	}
	for name := range reqs {
		if r := h.result(name); r.Err != nil {
			t.Errorf("%s: %v", name, r.Err)
		}
	}
}

// banAll is a logit bias banning every token of the fake vocabulary.
func banAll() []engine.LogitBias {
	b := make([]engine.LogitBias, enginetest.Vocab)
	for i := range b {
		b[i] = engine.LogitBias{Token: engine.Token(i), Bias: float32(math.Inf(-1))}
	}
	return b
}
