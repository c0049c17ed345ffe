package sched

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// refusingEngine refuses the plans refuse picks, as the real engine's
// validation does: before anything changes, with no events.
type refusingEngine struct {
	*enginetest.Fake
	refuse  func(p *engine.Plan) error
	refused int
}

func (r *refusingEngine) Tick(p *engine.Plan) (*engine.Events, error) {
	if err := r.refuse(p); err != nil {
		r.refused++
		return &engine.Events{}, err
	}
	return r.Fake.Tick(p)
}

// newRefusingHarness is a harness whose engine refuses what refuse picks,
// logging to the returned buffer.
func newRefusingHarness(t *testing.T, lanes int, refuse func(p *engine.Plan) error) (*harness, *refusingEngine, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	h := newHarness(t, lanes, 512, Config{}).fast()
	re := &refusingEngine{Fake: h.eng, refuse: refuse}
	cfg := h.loop.p.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h.loop = newLoop(re, h.cache, cfg, h.stats)
	return h, re, &logs
}

func blame(tag uint32) error {
	return &engine.Error{Status: engine.StatusInvalid, Op: "tick", Msg: "sampling parameters out of range", Lane: tag, HasLane: true}
}

// admitOf is the admit of a prompt of n tokens in p, or nil.
func admitOf(p *engine.Plan, n int) *engine.Admit {
	for i := range p.Admits {
		if int(p.Admits[i].PromptLen) == n {
			return &p.Admits[i]
		}
	}
	return nil
}

// A refused admit that blames its lane fails that request alone: the lanes
// already running, and the request admitted beside it, carry on with the
// output they would have had, and the refusal is logged and counted.
func TestRefusedAdmitFailsOnlyItsRequest(t *testing.T) {
	const poison = 77 // the prompt length that marks the request the engine refuses
	h, re, logs := newRefusingHarness(t, 4, func(p *engine.Plan) error {
		if a := admitOf(p, poison); a != nil {
			return blame(a.Lane)
		}
		return nil
	})
	reqs := map[string]Request{
		"a": {Prompt: promptOf(1, 300), Class: Agent, MaxTokens: 200},
		"b": {Prompt: promptOf(2, 120), Class: Chat, MaxTokens: 150},
	}
	for name, req := range reqs {
		h.submit(name, req)
	}
	h.step()
	h.step()
	reqs["c"] = Request{Prompt: promptOf(3, 50), Class: Background, MaxTokens: 40}
	h.submit("bad", Request{Prompt: promptOf(4, poison), Class: Chat, MaxTokens: 40})
	h.submit("c", reqs["c"])
	h.run(1000)
	for name, req := range reqs {
		h.expectOutput(name, req)
	}
	r := h.result("bad")
	if r.Finish != FinishError || !errors.Is(r.Err, engine.ErrInvalid) {
		t.Fatalf("the refused request ended %v, %v", r.Finish, r.Err)
	}
	if re.refused != 1 || h.stats.tickErrors.Load() != 1 {
		t.Fatalf("%d refusals, %d tick errors counted; want 1 and 1", re.refused, h.stats.tickErrors.Load())
	}
	log := logs.String()
	for _, want := range []string{"level=ERROR", "admits=2", "prefill_tokens=", "decode_lanes=", "batch=512", `action="failed the lane at fault"`, "class=chat"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// A refusal blaming a lane that is already running fails that lane: it
// leaves the engine, its stream ends with the error, and the other lanes'
// output is unchanged.
func TestRefusalOfARunningLaneFailsOnlyThatLane(t *testing.T) {
	var victim uint32
	h, _, _ := newRefusingHarness(t, 3, func(p *engine.Plan) error {
		for _, d := range p.Decodes {
			if victim != 0 && d.Lane == victim {
				return blame(victim)
			}
		}
		return nil
	})
	reqs := map[string]Request{
		"a": {Prompt: promptOf(1, 100), Class: Chat, MaxTokens: 300},
		"b": {Prompt: promptOf(2, 100), Class: Agent, MaxTokens: 300},
		"c": {Prompt: promptOf(3, 100), Class: Background, MaxTokens: 300},
	}
	for _, name := range []string{"a", "b", "c"} {
		h.submit(name, reqs[name])
	}
	for len(h.out["b"]) == 0 {
		h.step() // until b decodes: its first token comes from its prefill
	}
	victim = h.laneOf("b")
	got := len(h.out["b"])
	h.run(1000)
	h.expectOutput("a", reqs["a"])
	h.expectOutput("c", reqs["c"])
	if r := h.result("b"); r.Finish != FinishError || r.Err == nil {
		t.Fatalf("the blamed lane ended %v, %v", r.Finish, r.Err)
	}
	if len(h.out["b"]) != got {
		t.Fatalf("the blamed lane delivered %d tokens after its refusal", len(h.out["b"])-got)
	}
	if h.eng.HasLane(victim) {
		t.Fatal("the blamed lane is still in the engine")
	}
}

// A refusal that blames no lane is planned again with half the
// admissions, as often as it takes; the requests taken back wait and run
// later, and nobody fails.
func TestUnblamedRefusalHalvesTheAdmissions(t *testing.T) {
	h, re, _ := newRefusingHarness(t, 8, func(p *engine.Plan) error {
		if len(p.Admits) > 1 {
			return &engine.Error{Status: engine.StatusBatch, Op: "tick", Msg: "too much at once"}
		}
		return nil
	})
	reqs := map[string]Request{}
	for i, name := range []string{"r0", "r1", "r2", "r3", "r4", "r5"} {
		reqs[name] = Request{Prompt: promptOf(10+i, 40+i), Class: Class(i % NumClasses), MaxTokens: 30}
		h.submit(name, reqs[name])
	}
	h.run(1000)
	for name, req := range reqs {
		h.expectOutput(name, req)
	}
	if re.refused == 0 {
		t.Fatal("the engine refused nothing: the test tests nothing")
	}
	if h.stats.admitsDeferred.Load() == 0 {
		t.Fatal("no admission was taken back")
	}
}

// An admission the engine refuses every time, without blaming it, is
// taken back a few times and then fails; it never holds the others up.
func TestAdmissionRefusedEveryTimeFailsAfterItsDeferrals(t *testing.T) {
	const poison = 61
	h, _, _ := newRefusingHarness(t, 2, func(p *engine.Plan) error {
		if admitOf(p, poison) != nil {
			return &engine.Error{Status: engine.StatusBatch, Op: "tick", Msg: "no"}
		}
		return nil
	})
	ok := Request{Prompt: promptOf(1, 80), Class: Agent, MaxTokens: 50}
	h.submit("bad", Request{Prompt: promptOf(2, poison), Class: Chat, MaxTokens: 10})
	h.submit("ok", ok)
	h.run(1000)
	h.expectOutput("ok", ok)
	r := h.result("bad")
	if r.Finish != FinishError || !errors.Is(r.Err, engine.ErrBatch) {
		t.Fatalf("the refused request ended %v, %v", r.Finish, r.Err)
	}
	if j := h.jobs["bad"]; j.deferrals != maxDeferrals+1 {
		t.Fatalf("taken back %d times, want %d", j.deferrals, maxDeferrals+1)
	}
}

// When even a plan without admissions is refused and no lane is blamed,
// the running lanes fail; queued requests go on.
func TestUnblamedRefusalWithoutAdmissionsFailsTheLanes(t *testing.T) {
	once := false
	h, _, logs := newRefusingHarness(t, 2, func(p *engine.Plan) error {
		if !once && len(p.Admits) == 0 && len(p.Decodes) == 2 {
			once = true
			return &engine.Error{Status: engine.StatusDecode, Op: "tick", Msg: "llama_decode failed"}
		}
		return nil
	})
	h.submit("a", Request{Prompt: promptOf(1, 30), Class: Agent, MaxTokens: 100})
	h.submit("b", Request{Prompt: promptOf(2, 30), Class: Agent, MaxTokens: 100})
	h.step()
	later := Request{Prompt: promptOf(3, 30), Class: Agent, MaxTokens: 20}
	h.submit("later", later)
	h.run(1000)
	for _, name := range []string{"a", "b"} {
		if r := h.result(name); r.Finish != FinishError || !errors.Is(r.Err, &engine.Error{Status: engine.StatusDecode}) {
			t.Fatalf("%s ended %v, %v", name, r.Finish, r.Err)
		}
	}
	h.expectOutput("later", later)
	if !strings.Contains(logs.String(), `action="failed every lane"`) {
		t.Fatalf("log: %s", logs.String())
	}
}

// A retire the engine refuses for one lane (it no longer holds it) drops
// that lane alone; the others retire and run on.
func TestRefusedRetireDropsOnlyThatLane(t *testing.T) {
	const bad = 1 // the first lane admitted: "short"
	lost := false
	var h *harness
	h, _, _ = newRefusingHarness(t, 2, func(p *engine.Plan) error {
		for _, r := range p.Retires {
			if r == bad && !lost {
				// The engine loses the lane; the fake then refuses the
				// retire itself, blaming it.
				lost = true
				if _, err := h.eng.Tick(&engine.Plan{Retires: []uint32{bad}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return nil
	})
	short := Request{Prompt: promptOf(1, 30), Class: Agent, MaxTokens: 5}
	long := Request{Prompt: promptOf(2, 30), Class: Agent, MaxTokens: 120}
	h.submit("short", short)
	h.submit("long", long)
	h.run(1000)
	if !lost {
		t.Fatal("the lane was never retired: the test tests nothing")
	}
	if h.laneOf("short") != 0 && h.laneOf("short") != bad {
		t.Fatalf("short ran on lane %d, not %d", h.laneOf("short"), bad)
	}
	h.expectOutput("short", short)
	h.expectOutput("long", long)
	if n := len(h.eng.Refusals); n != 1 {
		t.Fatalf("%d refusals, want the one retire", n)
	}
	if h.eng.Lanes() != 0 {
		t.Fatalf("the engine still holds %d lanes", h.eng.Lanes())
	}
}

// A lane the engine no longer holds is refused in the next plan that
// names it, and only its request fails.
func TestLaneTheEngineLostFailsAlone(t *testing.T) {
	h := newHarness(t, 2, 512, Config{}).fast()
	a := Request{Prompt: promptOf(1, 30), Class: Agent, MaxTokens: 100}
	b := Request{Prompt: promptOf(2, 30), Class: Agent, MaxTokens: 100}
	h.submit("a", a)
	h.submit("b", b)
	h.step()
	lost := h.laneOf("b")
	if _, err := h.eng.Tick(&engine.Plan{Retires: []uint32{lost}}); err != nil {
		t.Fatal(err)
	}
	h.run(1000)
	h.expectOutput("a", a)
	if r := h.result("b"); r.Finish != FinishError || !errors.Is(r.Err, engine.ErrUnknownLane) {
		t.Fatalf("b ended %v, %v", r.Finish, r.Err)
	}
}
