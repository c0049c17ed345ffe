package sched

import (
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// steppingEngine reports its tick's tokens one step at a time, as the cgo
// engine does, so that the loop's early delivery is exercised.
type steppingEngine struct {
	*enginetest.Fake
	hook  func(ev *engine.Events)
	calls int
}

func (s *steppingEngine) SetStepHook(h func(ev *engine.Events)) { s.hook = h }

func (s *steppingEngine) Tick(p *engine.Plan) (*engine.Events, error) {
	ev, err := s.Fake.Tick(p)
	if s.hook != nil && ev != nil {
		// One report per token: the finest a step could be.
		for n := 1; n <= len(ev.Tokens); n++ {
			step := engine.Events{Tokens: ev.Tokens[:n], Top: ev.Top}
			s.hook(&step)
			s.calls++
		}
	}
	return ev, err
}

func newSteppingHarness(t *testing.T, lanes int) (*harness, *steppingEngine) {
	h := newHarness(t, lanes, 4096, Config{}).fast()
	se := &steppingEngine{Fake: h.eng}
	h.loop = newLoop(se, h.cache, h.loop.p.cfg, h.stats)
	return h, se
}

func TestEarlyDeliveryGivesTheSameStreams(t *testing.T) {
	h, se := newSteppingHarness(t, 2)
	prompt := promptOf(5, 30)
	ref := enginetest.Reference(prompt, 100, 0, nil, h.eng.Descriptor().Ctx)
	stopReq := Request{Prompt: prompt, Class: Chat, MaxTokens: 100, StopTokens: []engine.Token{ref[6]}, Logprobs: 3}
	plain := Request{Prompt: promptOf(9, 40), Class: Background, MaxTokens: 50}
	h.submit("stop", stopReq)
	h.submit("plain", plain)
	h.run(200)
	if se.calls == 0 {
		t.Fatal("the step hook was never called")
	}
	h.expectOutput("stop", stopReq)
	h.expectOutput("plain", plain)
	if r := h.result("stop"); r.Finish != FinishStop {
		t.Fatalf("finish %v", r.Finish)
	}
	if snap := h.stats.Snapshot(); snap.TTFTCount != 2 {
		t.Fatalf("TTFT observed %d times for 2 requests", snap.TTFTCount)
	}
}
