package sched

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
	"superfluid/panics"
)

// The scheduler's panic policy: a panic in the engine, in the cache or in
// the loop's own step is recovered, counted under "scheduler", fails the
// work at fault, and the loop keeps serving.

// An engine that panics on the plan admitting one request: the admissions
// are taken back half at a time, as for an engine error that blames no
// lane, until that request fails alone; the others run to their reference
// output.
func TestEnginePanicFailsOnlyTheAdmissionAtFault(t *testing.T) {
	const poison = 77
	h, _, _ := newRefusingHarness(t, 4, func(p *engine.Plan) error {
		if admitOf(p, poison) != nil {
			panic("engine fault on this prompt")
		}
		return nil
	})
	before := panics.Count(panics.Scheduler)
	reqs := map[string]Request{
		"a": {Prompt: promptOf(1, 300), Class: Agent, MaxTokens: 200},
		"b": {Prompt: promptOf(2, 120), Class: Chat, MaxTokens: 150},
		"c": {Prompt: promptOf(3, 50), Class: Background, MaxTokens: 40},
	}
	h.submit("a", reqs["a"])
	h.step()
	h.submit("bad", Request{Prompt: promptOf(4, poison), Class: Chat, MaxTokens: 40})
	h.submit("b", reqs["b"])
	h.submit("c", reqs["c"])
	h.run(1000)
	for name, req := range reqs {
		h.expectOutput(name, req)
	}
	r := h.result("bad")
	var pe *panics.Error
	if r.Finish != FinishError || !errors.As(r.Err, &pe) {
		t.Fatalf("the request at fault ended %v, %v; want an error carrying the panic", r.Finish, r.Err)
	}
	if panics.Count(panics.Scheduler) == before {
		t.Error("the panic was not counted")
	}
}

// panickyCache panics acquiring a sequence for a prompt of one length.
type panickyCache struct {
	*fakeCache
	poison int
}

func (c *panickyCache) Acquire(tokens []engine.Token) (int32, int, error) {
	if len(tokens) == c.poison {
		panic("cache fault on this prompt")
	}
	return c.fakeCache.Acquire(tokens)
}

// A cache that panics on one prompt fails that request at admission (not
// queued again, where it would panic at every step); the others run.
func TestCachePanicFailsOnlyItsRequest(t *testing.T) {
	const poison = 33
	h := newHarness(t, 2, 512, Config{}).fast()
	h.loop = newLoop(h.eng, &panickyCache{fakeCache: h.cache, poison: poison}, h.loop.p.cfg, h.stats)
	before := panics.Count(panics.Scheduler)
	reqs := map[string]Request{
		"a": {Prompt: promptOf(1, 100), Class: Chat, MaxTokens: 60},
		"b": {Prompt: promptOf(2, 40), Class: Agent, MaxTokens: 60},
	}
	h.submit("a", reqs["a"])
	h.submit("bad", Request{Prompt: promptOf(3, poison), Class: Chat, MaxTokens: 10})
	h.submit("b", reqs["b"])
	h.run(1000)
	for name, req := range reqs {
		h.expectOutput(name, req)
	}
	if r := h.result("bad"); r.Finish != FinishError || r.Err == nil {
		t.Fatalf("the request at fault ended %v, %v", r.Finish, r.Err)
	}
	if got := panics.Count(panics.Scheduler) - before; got != 1 {
		t.Errorf("%d panics counted, want 1", got)
	}
}

// releasePanicCache panics once giving a sequence back: a fault in the
// loop's own bookkeeping, which no finer recover catches.
type releasePanicCache struct {
	*fakeCache
	armed atomic.Bool
}

func (c *releasePanicCache) Release(seq int32, tokens []engine.Token) {
	if c.armed.CompareAndSwap(true, false) {
		panic("fault giving a sequence back")
	}
	c.fakeCache.Release(seq, tokens)
}

// A panic escaping a step of the running scheduler fails that step's lanes
// and no more: the runner goes on, the next request is served, and Run
// ends without leaving a goroutine behind (synctest checks).
func TestRunnerSurvivesAPanicInAStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := enginetest.New(2, 512, 12, 1<<16, sleeper{})
		eng.Cost = enginetest.CostModel{Step: time.Millisecond, PrefillToken: 10 * time.Microsecond, DecodeRow: time.Millisecond}
		cache := &releasePanicCache{fakeCache: newFakeCache(t, eng)}
		s, err := New(eng, cache, Config{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		before := panics.Count(panics.Scheduler)

		cache.armed.Store(true)
		st, err := s.Submit(context.Background(), Request{Prompt: promptOf(1, 30), Class: Chat, MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		_, res, _ := st.Collect(context.Background())
		if res.Finish != FinishError && res.Finish != FinishLength {
			t.Errorf("the request of the step that panicked ended %v (%v)", res.Finish, res.Err)
		}
		if panics.Count(panics.Scheduler) == before {
			t.Error("the panic was not counted")
		}

		req := Request{Prompt: promptOf(2, 40), Class: Chat, MaxTokens: 20}
		st, err = s.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		toks, res, err := st.Collect(context.Background())
		if err != nil || res.Err != nil || len(toks) != 20 {
			t.Fatalf("the next request: %d tokens, %v / %v", len(toks), err, res.Err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
