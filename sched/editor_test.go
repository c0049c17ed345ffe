package sched

import (
	"fmt"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// smallModelCost is roughly the `small` f16 model on the 2-core CPU: a
// lone decode step of about 6 ms, a 94-token FIM prompt in about 50 ms,
// rows dearer with depth.
var smallModelCost = enginetest.CostModel{Step: 5 * time.Millisecond, PrefillToken: 400 * time.Microsecond, DecodeRow: time.Millisecond, PerPosition: 100 * time.Nanosecond}

// timedPlan is a plan that ran and how long its step took.
type timedPlan struct {
	plan engine.Plan
	took time.Duration
}

// runTimed runs up to limit loop steps (until idle), recording each plan
// and its step's duration.
func runTimed(h *harness, limit int) []timedPlan {
	var out []timedPlan
	for range limit {
		before, start := len(h.eng.Plans), h.clock.Now()
		busy := h.step()
		for _, pl := range h.eng.Plans[before:] {
			out = append(out, timedPlan{plan: pl, took: h.clock.Now().Sub(start)})
		}
		if !busy {
			break
		}
	}
	return out
}

// An editor at work beside four background prompts on a small model. The
// editor's next completion lands in the step that began when its last one
// ended; while it works, a background prefill step fits eight of its
// decode steps (about 50 ms here), not the interactive bound's 150 ms.
// Each completion then decodes without background rows while its reply
// is short, so its steps cost what they cost idle. On the old rule the
// background steps ran 150 ms and the background lanes decoded in every
// FIM step.
func TestEditorWaitsLittleAndDecodesAlone(t *testing.T) {
	h := newHarness(t, 8, 2048, Config{})
	h.eng.Cost = smallModelCost
	h.eng.KeepPlans = true
	reqs := map[string]Request{}
	for i := range 4 {
		// Two of the background prompts are short, so their lanes decode
		// while the editor works; two are long and prefill meanwhile.
		n := 2000
		if i < 2 {
			n = 300
		}
		name := fmt.Sprint("bg", i)
		reqs[name] = Request{Prompt: promptOf(10+i, n), Class: Background, MaxTokens: 400}
		h.submit(name, reqs[name])
	}
	for range 6 {
		h.step()
	}
	var fimLanes []uint32
	var steps []timedPlan
	for i := range 4 {
		name := fmt.Sprint("fim", i)
		reqs[name] = Request{Prompt: promptOf(50+i, 94), Class: FIM, MaxTokens: 32}
		h.submit(name, reqs[name])
		steps = append(steps, runTimed(h, 1)...) // admits it and prefills its prompt
		fimLanes = append(fimLanes, h.laneOf(name))
		for !h.done(name) {
			steps = append(steps, runTimed(h, 1)...)
		}
		// The editor's next request comes as soon as this one ends: the
		// step planned now is the one it lands in.
		steps = append(steps, runTimed(h, 1)...)
	}
	h.run(100000)
	for name, req := range reqs {
		if r := h.result(name); r.Err != nil {
			t.Fatalf("%s: %v", name, r.Err)
		}
		h.expectOutput(name, req)
	}

	isFIM := func(tag uint32) bool {
		for _, f := range fimLanes {
			if f == tag {
				return true
			}
		}
		return false
	}
	bgPrefill, fimDecodes, beside := 0, 0, 0
	var longest time.Duration
	for _, s := range steps {
		carriesFIM := false
		for _, d := range s.plan.Decodes {
			carriesFIM = carriesFIM || isFIM(d.Lane)
		}
		for _, f := range s.plan.Prefills {
			carriesFIM = carriesFIM || isFIM(f.Lane)
		}
		if !carriesFIM && len(s.plan.Prefills) > 0 {
			bgPrefill++
			longest = max(longest, s.took)
		}
		if carriesFIM && len(s.plan.Prefills) == 0 {
			fimDecodes++
			if len(s.plan.Decodes) > 1 {
				beside++
			}
		}
	}
	if bgPrefill == 0 || fimDecodes == 0 {
		t.Fatalf("%d background prefill steps, %d FIM decode steps between the completions: the load did not overlap them", bgPrefill, fimDecodes)
	}
	if bound := editorWaitDecodeSteps * 8 * time.Millisecond; longest > bound {
		t.Errorf("a background prefill step while the editor worked took %v; want at most about eight decode steps (%v)", longest, bound)
	}
	if beside > 0 {
		t.Errorf("%d of %d FIM decode steps carried background rows; want none while the reply is short", beside, fimDecodes)
	}
}

// stallingEngine stalls the clock inside the ticks stall picks, as a
// loaded machine does to one step now and then.
type stallingEngine struct {
	*enginetest.Fake
	clock *fakeClock
	ticks int
	stall func(tick int, p *engine.Plan) time.Duration
}

func (s *stallingEngine) Tick(p *engine.Plan) (*engine.Events, error) {
	s.ticks++
	d := s.stall(s.ticks, p)
	s.clock.Advance(d)
	ev, err := s.Fake.Tick(p)
	if ev != nil {
		ev.Timings.StepNS += int64(d) // the engine's own measure of the step
	}
	return ev, err
}

// A decode step of a FIM reply that stalls for a second (a loaded machine)
// does not make the reply look long: background prefill and decode stay
// held for the rest of it. Learnt whole, the stall released both holds and
// background rows joined the reply's steps.
func TestStalledStepKeepsTheEditorHolds(t *testing.T) {
	h := newHarness(t, 8, 2048, Config{})
	h.eng.Cost = smallModelCost
	h.eng.KeepPlans = true
	noStall := func(int, *engine.Plan) time.Duration { return 0 }
	se := &stallingEngine{Fake: h.eng, clock: h.clock, stall: noStall}
	h.loop = newLoop(se, h.cache, h.loop.p.cfg, h.stats)
	reqs := map[string]Request{
		"bgDecoding":   {Prompt: promptOf(1, 300), Class: Background, MaxTokens: 400},
		"bgPrefilling": {Prompt: promptOf(2, 2000), Class: Background, MaxTokens: 8},
		"fim":          {Prompt: promptOf(3, 94), Class: FIM, MaxTokens: 32},
	}
	h.submit("bgDecoding", reqs["bgDecoding"])
	h.submit("bgPrefilling", reqs["bgPrefilling"])
	for range 4 {
		h.step()
	}
	h.submit("fim", reqs["fim"])
	h.step()
	fim := h.laneOf("fim")
	decodes := 0
	se.stall = func(tick int, p *engine.Plan) time.Duration {
		if len(p.Decodes) == 1 && p.Decodes[0].Lane == fim {
			if decodes++; decodes == 3 {
				return time.Second
			}
		}
		return 0
	}
	before := len(h.eng.Plans)
	for !h.done("fim") {
		h.step()
	}
	if decodes < 3 {
		t.Fatalf("the FIM reply decoded alone in %d steps; the stall never came", decodes)
	}
	for _, pl := range h.eng.Plans[before:] {
		if decodesIn(&pl, fim) && (len(pl.Prefills) > 0 || len(pl.Decodes) > 1) {
			t.Fatalf("after the stall a step of the FIM reply carried %d prompt chunks and %d decoding lanes; want it alone", len(pl.Prefills), len(pl.Decodes))
		}
	}
	se.stall = noStall
	h.run(100000)
	for name, req := range reqs {
		h.expectOutput(name, req)
	}
}
