package sched

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// deepCost is an engine whose prompt tokens grow dearer with depth as the
// tiny model's do on the CPU: 512 tokens take about 0.19 s at the start of
// a prompt, 0.45 s from 512 on and 0.71 s from 1024 on, and one token 8 ms
// at depth 8000.
var deepCost = enginetest.CostModel{Step: 10 * time.Millisecond, PrefillToken: 100 * time.Microsecond,
	DecodeRow: 500 * time.Microsecond, PerPosition: time.Microsecond}

// stepTimer records each step's reported time beside its prefill.
type stepTimer struct {
	*enginetest.Fake
	steps []timedStep
}

type timedStep struct {
	prefill, decodes, depth int
	secs                    float64
}

func (e *stepTimer) Tick(p *engine.Plan) (*engine.Events, error) {
	n, depth := 0, 0
	for _, f := range p.Prefills {
		n += int(f.Count)
		depth = max(depth, int(f.Offset))
	}
	ev, err := e.Fake.Tick(p)
	if err == nil && n > 0 {
		e.steps = append(e.steps, timedStep{prefill: n, decodes: len(p.Decodes), depth: depth, secs: float64(ev.Timings.StepNS) / 1e9})
	}
	return ev, err
}

// deepPromptSteps runs one 8,000-token background prompt on a four-lane
// scheduler and returns its prefill steps. With company, an agent's reply
// decodes beside it throughout (a newcomer could join after every step);
// without, it runs alone.
func deepPromptSteps(t *testing.T, batch int, company bool) []timedStep {
	h := newHarness(t, 4, batch, Config{})
	h.eng.Cost = deepCost
	timer := &stepTimer{Fake: h.eng}
	h.loop.eng = timer
	if company {
		h.submit("agent", Request{Prompt: promptOf(2, 16), Class: Agent, MaxTokens: 1 << 20})
		for range 4 { // its prompt in, its reply decoding
			h.step()
		}
		timer.steps = nil
	}
	req := Request{Prompt: promptOf(1, 8000), Class: Background, MaxTokens: 2}
	h.submit("long", req)
	for i := 0; !h.done("long"); i++ {
		if i == 100000 {
			t.Fatal("the long prompt never finished")
		}
		h.step()
	}
	if company {
		h.jobs["agent"].stream.Cancel()
	}
	h.run(10000)
	h.expectOutput("long", req)
	return timer.steps
}

// Deep into a long prompt each step stays at about joinWaitSecs: the
// bound follows the prompt's depth instead of the rate of the steps
// before (which, at a 512-token batch, let the third step run 40% over).
func TestJoinWaitHoldsDeepIntoALongPrompt(t *testing.T) {
	steps := deepPromptSteps(t, 512, true)
	lo, hi := 0.75*joinWaitSecs, 1.25*joinWaitSecs
	for i, s := range steps {
		if i < 3 {
			continue // the model is learning
		}
		if s.secs > hi {
			t.Errorf("step %d at depth %d: %d tokens took %.3f s, over %.3f", i, s.depth, s.prefill, s.secs, hi)
		}
		// A step the batch did not cap, and not the prompt's last, is
		// bounded by the join wait from below too.
		if s.prefill+s.decodes < 512 && s.prefill > joinWaitMinTokens && i < len(steps)-1 && s.secs < lo {
			t.Errorf("step %d at depth %d: %d tokens took %.3f s, under %.3f", i, s.depth, s.prefill, s.secs, lo)
		}
	}
	last := steps[len(steps)-2]
	if last.depth < 7000 || last.prefill >= 128 {
		t.Fatalf("the prompt's deep steps (%+v) are not the ones shrunk", last)
	}
}

// At a 64-token batch (--batch 64) the step never goes below the whole
// batch, deep in the prompt too, where 64 tokens take longer than the
// bound.
func TestJoinWaitKeepsTheMinimumStepDeepIntoALongPrompt(t *testing.T) {
	steps := deepPromptSteps(t, 64, true)
	for i, s := range steps[:len(steps)-1] {
		if s.prefill+s.decodes != 64 {
			t.Fatalf("step %d at depth %d carried %d tokens beside %d decodes, want the batch of 64", i, s.depth, s.prefill, s.decodes)
		}
	}
}

// A prompt alone runs whole micro-batches within soloWaitSecs, at least
// one, deep into it too: at the CPU's default batch of 2048 (micro-batch
// 512) the first step is one micro-batch (nothing is learnt), the steps
// where 2048 tokens fit the bound take the whole batch, and deeper ones
// shrink by micro-batches to one, never below.
func TestSoloStepsAreWholeMicroBatchesWithinTheBound(t *testing.T) {
	steps := deepPromptSteps(t, 2048, false)
	sizes := map[int]bool{}
	for i, s := range steps {
		last := i == len(steps)-1
		if !last && s.prefill%512 != 0 {
			t.Errorf("step %d at depth %d: %d tokens, not whole micro-batches", i, s.depth, s.prefill)
		}
		if i >= 3 && s.prefill > 512 && s.secs > 1.25*soloWaitSecs { // from the fourth: the model is learning
			t.Errorf("step %d at depth %d: %d tokens took %.3f s, over %.3f", i, s.depth, s.prefill, s.secs, 1.25*soloWaitSecs)
		}
		if !last && s.prefill < 512 {
			t.Errorf("step %d at depth %d: %d tokens, under one micro-batch", i, s.depth, s.prefill)
		}
		sizes[s.prefill] = true
	}
	if steps[0].prefill != 512 || !sizes[2048] || steps[len(steps)-2].prefill != 512 {
		t.Errorf("steps %+v: want one micro-batch first, whole batches, then one micro-batch deep in the prompt", steps)
	}
}

// A FIM request at one engine waits out the step in flight on another;
// deep into the other's long background prompt that step still takes
// about joinWaitSecs.
func TestFIMBesideADeepPromptOnAnotherEngineWaitsAboutJoinWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sBig, sSmall, log, stop := bigBesideSmall(t, 512, deepCost)
		defer stop()

		ctx := context.Background()
		bg, err := sBig.Submit(ctx, Request{Prompt: promptOf(1, 8000), Class: Background, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		prefilled := func() int {
			n := 0
			for _, tk := range log.snapshot() {
				if tk.engine == "big" {
					n += tk.prefill
				}
			}
			return n
		}
		for prefilled() < 6000 {
			time.Sleep(100 * time.Millisecond)
		}
		// Mid-step, as a request arrives: the worst case is at a step's
		// start; a step's length bounds it.
		submitted := time.Now()
		fimReq := Request{Prompt: promptOf(2, 100), Class: FIM, MaxTokens: 8}
		fim, err := sSmall.Submit(ctx, fimReq)
		if err != nil {
			t.Fatal(err)
		}
		if _, r, err := fim.Collect(ctx); err != nil || r.Err != nil {
			t.Fatalf("fim: %v %+v", err, r)
		}
		if _, rb, err := bg.Collect(ctx); err != nil || rb.Err != nil {
			t.Fatalf("background: %v %+v", err, rb)
		}
		ticks := log.snapshot()
		checkNoOverlap(t, ticks)
		var fimStart time.Time
		var longestDeep time.Duration
		depth := 0
		for _, tk := range ticks {
			if tk.engine == "small" && fimStart.IsZero() && tk.start.After(submitted) {
				fimStart = tk.start
			}
			if tk.engine == "big" {
				if depth >= 4000 {
					longestDeep = max(longestDeep, tk.end.Sub(tk.start))
				}
				depth += tk.prefill
			}
		}
		if wait := fimStart.Sub(submitted); wait > 600*time.Millisecond {
			t.Errorf("the FIM request waited %v for the other engine's step", wait)
		}
		if longestDeep > 600*time.Millisecond || longestDeep < 300*time.Millisecond {
			t.Errorf("the other engine's steps past depth 4000 took up to %v; want about %v", longestDeep, time.Duration(joinWaitSecs*float64(time.Second)))
		}
		t.Logf("FIM waited %v; longest deep step %v", fimStart.Sub(submitted), longestDeep)
	})
}

// On a model whose engine checkpoints partial state every 512 tokens (a
// sliding-window or hybrid model), a prompt alone is cut where the
// checkpoints go, whatever the step could carry: every chunk ends at a
// multiple of 512 or at the prompt's end.
func TestChunksOfACheckpointingModelEndWhereCheckpointsGo(t *testing.T) {
	h := newHarness(t, 4, 2048, Config{})
	h.eng.Descriptor().CheckpointEvery = 512
	h = newHarnessOn(t, h.eng, h.clock, Config{})
	h.fast()
	req := Request{Prompt: promptOf(1, 1400), Class: Background, MaxTokens: 2}
	h.submit("long", req)
	var ends []int
	rec := &chunkRecorder{Fake: h.eng, ends: &ends}
	h.loop.eng = rec
	h.run(1000)
	h.expectOutput("long", req)
	if want := []int{512, 1024, 1400}; !slices.Equal(ends, want) {
		t.Fatalf("chunks ended at %v, want %v", ends, want)
	}
}

// A recurrent model's engine also checkpoints a few tokens before a
// prompt's end (engine.Descriptor.CheckpointTail): its last chunk stops
// there, so that the same prompt again resumes there.
func TestChunksOfARecurrentModelStopBeforeThePromptsEnd(t *testing.T) {
	h := newHarness(t, 4, 2048, Config{})
	h.eng.Descriptor().CheckpointEvery = 512
	h.eng.Descriptor().CheckpointTail = 4
	h = newHarnessOn(t, h.eng, h.clock, Config{})
	h.fast()
	var ends []int
	rec := &chunkRecorder{Fake: h.eng, ends: &ends}
	h.loop.eng = rec
	for _, n := range []int{1400, 300, 1028, 3} {
		ends = ends[:0]
		req := Request{Prompt: promptOf(n, n), Class: Background, MaxTokens: 2}
		name := fmt.Sprint("prompt of ", n)
		h.submit(name, req)
		h.run(1000)
		h.expectOutput(name, req)
		want := map[int][]int{1400: {512, 1024, 1396, 1400}, 300: {296, 300}, 1028: {512, 1024, 1028}, 3: {3}}[n]
		if !slices.Equal(ends, want) {
			t.Errorf("a %d-token prompt's chunks ended at %v, want %v", n, ends, want)
		}
	}
}

// chunkRecorder notes where each prefill chunk of a plan ends.
type chunkRecorder struct {
	*enginetest.Fake
	ends *[]int
}

func (e *chunkRecorder) Tick(p *engine.Plan) (*engine.Events, error) {
	for _, f := range p.Prefills {
		*e.ends = append(*e.ends, int(f.Offset+f.Count))
	}
	return e.Fake.Tick(p)
}
