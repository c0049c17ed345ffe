package sched

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// steady is eight lanes of mixed classes, all decoding, none near an end.
func steady(tb testing.TB) *harness { return steadyWith(tb, Config{}) }

func steadyWith(tb testing.TB, cfg Config) *harness {
	h := newHarness(tb, 8, 512, cfg).fast()
	for i := range 8 {
		h.submit(fmt.Sprint("r", i), Request{Prompt: promptOf(i, 64), Class: Class(i % NumClasses), MaxTokens: 1 << 30})
	}
	for range 32 {
		h.loop.step(context.Background())
	}
	for _, l := range h.loop.p.lanes {
		if !l.decoding() {
			tb.Fatal("not steady: a lane still prefills")
		}
	}
	return h
}

// discard drops what a stream holds, keeping its buffer.
func discard(s *Stream) {
	s.mu.Lock()
	clear(s.buf)
	s.buf, s.head = s.buf[:0], 0
	s.mu.Unlock()
}

func (h *harness) discardAll() {
	for _, j := range h.jobs {
		discard(j.stream)
	}
}

// TestSteadyStateTickAllocatesNothing: the plan, the events and the
// per-lane bookkeeping are reused, so a tick of decoding lanes costs no
// allocation beyond the amortised growth of each lane's token record.
func TestSteadyStateTickAllocatesNothing(t *testing.T) {
	t.Run("alone", func(t *testing.T) { steadyStateTickAllocatesNothing(t, Config{}) })
	// An uncontended turn is a mutex: no allocation, no goroutine.
	t.Run("arbiter", func(t *testing.T) {
		steadyStateTickAllocatesNothing(t, Config{Arbiter: NewArbiter(ArbiterConfig{}).Join("alone")})
	})
}

func steadyStateTickAllocatesNothing(t *testing.T, cfg Config) {
	h := steadyWith(t, cfg)
	// Grow the token records up front: their amortised growth is the one
	// allocation a tick may make.
	for _, l := range h.loop.p.lanes {
		l.tokens = slices.Grow(l.tokens, 1<<16)
		h.eng.ReserveSeq(l.seq, 1<<16)
	}
	allocs := testing.AllocsPerRun(50, func() {
		h.loop.step(context.Background())
		h.discardAll()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per steady-state tick", allocs)
	}
	// The planner alone, without the fake engine's work.
	p := h.loop.p
	now := h.clock.Now()
	allocs = testing.AllocsPerRun(100, func() {
		p.buildPlan(now)
		p.ready.clear()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per plan", allocs)
	}
}

// BenchmarkPlan is the planner's cost per tick: eight decoding lanes, four
// queued requests it must look at and leave.
func BenchmarkPlan(b *testing.B) {
	h := steady(b)
	for i := range 4 {
		h.submit(fmt.Sprint("q", i), Request{Prompt: promptOf(100+i, 64), Class: Background, MaxTokens: 8})
	}
	p := h.loop.p
	now := h.clock.Now()
	b.ReportAllocs()
	for b.Loop() {
		p.beginAdmissions()
		p.nextAdmission(now)
		p.buildPlan(now)
	}
}

// BenchmarkStep is a whole loop step over the fake engine: plan, tick
// (about 32 rounds of eight lanes), take in the events, deliver tokens.
func BenchmarkStep(b *testing.B) {
	h := steady(b)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		h.loop.step(context.Background())
		h.discardAll()
		if n++; n%2000 == 0 {
			// Bound the sequences' growth.
			b.StopTimer()
			h = steady(b)
			b.StartTimer()
		}
	}
}
