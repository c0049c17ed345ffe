package sched

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// harness steps the scheduler's loop by hand in virtual time: the fake
// engine advances the clock by its cost model, nothing sleeps, and every
// run is the same.
type harness struct {
	t     testing.TB
	clock *fakeClock
	eng   *enginetest.Fake
	cache *fakeCache
	loop  *loop
	stats *counters
	jobs  map[string]*job
	out   map[string][]Token
	id    uint64
	// classes is each lane's class, for tests that record it.
	classes map[uint32]Class
}

func newHarness(t testing.TB, lanes, batch int, cfg Config) *harness {
	t.Helper()
	clock := newFakeClock()
	eng := enginetest.New(lanes, batch, 4*lanes+4, 1<<20, clock)
	return newHarnessOn(t, eng, clock, cfg)
}

func newHarnessOn(t testing.TB, eng *enginetest.Fake, clock *fakeClock, cfg Config) *harness {
	t.Helper()
	cfg.Clock = clock
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults(eng.Descriptor())
	if err := cfg.validate(eng.Descriptor()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clock: clock, eng: eng, cache: newFakeCache(t, eng), stats: &counters{},
		jobs: map[string]*job{}, out: map[string][]Token{}}
	h.loop = newLoop(eng, h.cache, cfg, h.stats)
	return h
}

// fast makes prefill cheap, so that learned rates leave budgets whole.
func (h *harness) fast() *harness {
	h.eng.Cost = enginetest.CostModel{Step: 2 * time.Millisecond, PrefillToken: 100 * time.Microsecond, DecodeRow: time.Millisecond}
	return h
}

func (h *harness) submit(name string, req Request) *job {
	h.t.Helper()
	if err := req.validate(h.eng.Descriptor()); err != nil {
		h.t.Fatalf("submit %s: %v", name, err)
	}
	h.id++
	j := newJob(h.id, &req)
	h.jobs[name] = j
	h.loop.submit(j)
	return j
}

// step runs one loop step, as Run does between inbox reads.
func (h *harness) step() bool {
	busy := h.loop.step(context.Background())
	for name, j := range h.jobs {
		h.out[name] = append(h.out[name], drain(j.stream)...)
	}
	return busy
}

// run steps until nothing runs or waits.
func (h *harness) run(limit int) {
	h.t.Helper()
	for range limit {
		if !h.step() {
			return
		}
	}
	h.t.Fatalf("still busy after %d steps", limit)
}

// done reports whether name's stream has its result.
func (h *harness) done(name string) bool {
	select {
	case <-h.jobs[name].stream.Done():
		return true
	default:
		return false
	}
}

func (h *harness) result(name string) Result {
	h.t.Helper()
	if !h.done(name) {
		h.t.Fatalf("%s has not ended", name)
	}
	return h.jobs[name].stream.Result()
}

func (h *harness) tokens(name string) []engine.Token {
	var ts []engine.Token
	for _, t := range h.out[name] {
		ts = append(ts, t.Token)
	}
	return ts
}

// expectOutput checks name generated what the fake model generates for
// its request run alone.
func (h *harness) expectOutput(name string, req Request) {
	h.t.Helper()
	want := enginetest.Reference(req.Prompt, req.MaxTokens, h.eng.EOGEvery, req.StopTokens, h.eng.Descriptor().Ctx)
	got := h.tokens(name)
	if !equalTokens(got, want) {
		h.t.Fatalf("%s: output of %d tokens differs from the reference's %d\n got %v\nwant %v", name, len(got), len(want), head(got), head(want))
	}
	if r := h.result(name); r.Generated != len(want) {
		h.t.Fatalf("%s: result says %d generated, %d delivered", name, r.Generated, len(want))
	}
}

// laneOf is the engine lane tag running name, or 0.
func (h *harness) laneOf(name string) uint32 {
	if l := h.loop.p.laneOf(h.jobs[name]); l != nil {
		return l.tag
	}
	return 0
}

// drain takes the tokens a stream holds without waiting.
func drain(s *Stream) []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Token(nil), s.buf[s.head:]...)
	s.buf, s.head = s.buf[:0], 0
	return out
}

func equalTokens(a, b []engine.Token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head(ts []engine.Token) []engine.Token { return ts[:min(len(ts), 12)] }

// promptOf is a deterministic prompt of n tokens; seeds give different ones.
func promptOf(seed, n int) []engine.Token {
	p := make([]engine.Token, n)
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = engine.Token(3 + x%(enginetest.Vocab-3))
	}
	return p
}

// prefillSteps are the plans, in order, that carried prefill.
func (h *harness) prefillSteps() []engine.Plan {
	var out []engine.Plan
	for _, p := range h.eng.Plans {
		if len(p.Prefills) > 0 {
			out = append(out, p)
		}
	}
	return out
}

func chunkOf(p *engine.Plan, tag uint32) int {
	for _, f := range p.Prefills {
		if f.Lane == tag {
			return int(f.Count)
		}
	}
	return 0
}

// decodesIn reports whether the plan puts a token of lane tag in its step.
func decodesIn(p *engine.Plan, tag uint32) bool {
	for _, d := range p.Decodes {
		if d.Lane == tag {
			return true
		}
	}
	return false
}
