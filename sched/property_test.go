package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// TestPlannerNeverMakesAPlanTheEngineRefuses drives the real loop and
// planner with random workloads (every class, prompts of 1 to 5,000
// tokens, several requests sharing a prompt, stop tokens, logprobs,
// cancels, deadlines, the preemptions Chat and FIM arrivals cause when
// every lane is busy, n-gram drafts on half the seeds) at batches of 32,
// 64, 512 and 2048 (the CPU's default, micro-batch 512), against the fake
// engine, which refuses what the real one refuses. No plan may be
// refused, every request must end with a result, and every request that
// ran to its end must have produced the output it produces alone.
func TestPlannerNeverMakesAPlanTheEngineRefuses(t *testing.T) {
	for _, batch := range []int{32, 64, 512, 2048} {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("batch=%d/seed=%d", batch, seed), func(t *testing.T) {
				t.Parallel()
				runRandomWorkload(t, batch, seed)
			})
		}
	}
}

// workloadCtx is the fake engine's context: long prompts and unbounded
// replies sometimes fill it.
const workloadCtx = 6144

func runRandomWorkload(t *testing.T, batch int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(batch)))
	lanes := 2 + rng.IntN(5)
	clock := newFakeClock()
	eng := enginetest.New(lanes, batch, 3*lanes+2, workloadCtx, clock)
	eng.EOGEvery = 150
	if seed%2 == 1 {
		// A KV pool that cannot hold every lane's prompt at once: KV-full
		// ticks, evictions and the preemptions they force.
		eng.KVCap = 3 * workloadCtx
	}
	cfg := Config{}
	if rng.IntN(2) == 0 {
		cfg.BackgroundDivisor = 1 + rng.IntN(3)
	}
	if seed%4 >= 2 {
		// n-gram drafts from single tokens too, gated or not: rows past
		// the decodes, rejected drafts cut back.
		eng.Descriptor().Drafts = true
		cfg.Speculation = Speculation{Type: SpecNgramSimple, NgramMin: 1, DraftMax: 1 + rng.IntN(8), Ungated: seed%4 == 3}
	}
	h := newHarnessOn(t, eng, clock, cfg)
	reqs := map[string]Request{}
	var names []string
	prompts := [][]engine.Token{}
	submit := func() {
		prompt := promptOf(rng.IntN(1<<20), promptLength(rng))
		if len(prompts) > 0 && rng.IntN(4) == 0 {
			// A follow-up: an earlier prompt and more.
			prev := prompts[rng.IntN(len(prompts))]
			prompt = append(append([]engine.Token(nil), prev...), prompt[:min(len(prompt), 200)]...)
			prompt = prompt[:min(len(prompt), workloadCtx-1)]
		}
		prompts = append(prompts, prompt)
		req := Request{Prompt: prompt, Class: Class(rng.IntN(NumClasses)), MaxTokens: rng.IntN(300)}
		if rng.IntN(5) == 0 {
			req.Logprobs = rng.IntN(engine.MaxLogprobs + 1)
		}
		if rng.IntN(6) == 0 {
			req.StopTokens = []engine.Token{engine.Token(3 + rng.IntN(enginetest.Vocab-3))}
		}
		if rng.IntN(6) == 0 {
			req.Deadline = clock.Now().Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
		}
		n := 1
		if rng.IntN(4) == 0 {
			n = 2 + rng.IntN(3) // choices sharing one prompt
		}
		for range n {
			name := fmt.Sprintf("r%d", len(names))
			names = append(names, name)
			reqs[name] = req
			h.submit(name, req)
		}
	}
	cancelled := map[string]bool{}
	for range 120 {
		switch r := rng.IntN(10); {
		case r < 4:
			submit()
		case r == 4 && len(names) > 0:
			name := names[rng.IntN(len(names))]
			cancelled[name] = true
			h.jobs[name].stream.Cancel()
		case r == 5:
			clock.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		h.step()
	}
	h.run(200_000)
	s := h.stats.Snapshot()
	t.Logf("batch %d, %d lanes, %d requests: %d ticks, %d prompt tokens, %d preemptions, %d KV-full ticks, %d cancelled, %d expired, %v virtual",
		batch, lanes, len(names), s.Ticks, s.PrefillTokens, s.Preemptions, s.KVFull, s.Cancelled, s.Expired, clock.since())
	if len(eng.Refusals) > 0 {
		t.Fatalf("the engine refused %d plans; the first: %v", len(eng.Refusals), eng.Refusals[0])
	}
	if n := h.stats.tickErrors.Load(); n != 0 {
		t.Fatalf("%d tick errors", n)
	}
	if cfg.Speculation.Type != "" {
		t.Logf("%d draft tokens, %d accepted, gates closed %d times", s.DraftTokens, s.DraftAccepted, s.DraftGateClosed)
		if s.DraftTokens == 0 {
			t.Fatal("speculation on, yet no draft")
		}
	}
	for _, name := range names {
		r := h.result(name) // fails the test if the request has not ended
		req := reqs[name]
		switch {
		case r.Err != nil && !cancelled[name] && r.Finish != FinishDeadline && !isDeadline(r.Err):
			if eng.KVCap > 0 && r.Finish == FinishError {
				continue // alone, and too big for the KV pool: said so
			}
			t.Fatalf("%s (%s, %d-token prompt): %v", name, req.Class, len(req.Prompt), r.Err)
		case r.Err == nil && (r.Finish == FinishCancelled || r.Finish == FinishDeadline):
		case r.Err == nil:
			want := enginetest.Reference(req.Prompt, req.MaxTokens, eng.EOGEvery, req.StopTokens, workloadCtx)
			if got := h.tokens(name); !equalTokens(got, want) {
				t.Fatalf("%s (%s, %d-token prompt, %d preemptions): %d tokens, the reference %d", name, req.Class, len(req.Prompt), r.Preemptions, len(got), len(want))
			}
		}
	}
}

// promptLength is 1 to 5,000 tokens, mostly short, as real traffic is.
func promptLength(rng *rand.Rand) int {
	switch rng.IntN(4) {
	case 0:
		return 1 + rng.IntN(64)
	case 1:
		return 64 + rng.IntN(512)
	case 2:
		return 512 + rng.IntN(1500)
	default:
		return 2000 + rng.IntN(3001)
	}
}

func isDeadline(err error) bool { return err == ErrDeadline || err == ErrCancelled }
