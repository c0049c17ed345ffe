package sched

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"superfluid/engine/enginetest"
)

// The planner's rule for replies taken whole, in virtual time at the CPU
// defaults (batch 2048, micro-batch 512, 8 lanes, a step cost learnt
// first): one request alone, then seven more arriving during its step.
// Taken whole, the seven prefill together in the next step beside the
// first lane's token; streamed, the first lane's token bounds each step
// to half a second and the first prompt to complete caps its tail, so
// they spread over several (the old rule, for both).
func TestBurstTakenWholePrefillsInOneStep(t *testing.T) {
	for _, whole := range []bool{true, false} {
		h := newHarness(t, 8, 2048, Config{})
		h.eng.KeepPlans = true
		h.submit("warm", Request{Prompt: promptOf(99, 1500), Class: Background, MaxTokens: 1})
		h.run(100)
		reqs := make([]Request, 8)
		for i := range reqs {
			reqs[i] = Request{Prompt: promptOf(100+i, 45+i), Class: Chat, MaxTokens: 6, Whole: whole}
		}
		h.submit("w0", reqs[0])
		h.step()
		before := len(h.prefillSteps())
		for i := 1; i < 8; i++ {
			h.submit(fmt.Sprint("w", i), reqs[i])
		}
		h.run(1000)
		steps := h.prefillSteps()[before:]
		switch {
		case whole && (len(steps) != 1 || len(steps[0].Prefills) != 7):
			t.Errorf("taken whole: %d prefill steps after the first lane's (the first with %d prompts); want the seven in one", len(steps), len(steps[0].Prefills))
		case !whole && len(steps) < 3:
			t.Errorf("streamed: %d prefill steps after the first lane's; want them bounded beside its tokens (several)", len(steps))
		}
		for i, req := range reqs {
			h.expectOutput(fmt.Sprint("w", i), req)
		}
	}
}

// Eight whole requests whose HTTP requests reached the server together
// (announced), submitted a few milliseconds apart as each is parsed, run
// their prompts in an idle runner's first step: it gathers while they are
// on their way. A streamed request is planned at once, and so are those
// that follow it into the next step.
func TestIdleRunnerGathersABurstTakenWhole(t *testing.T) {
	for _, whole := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			eng := enginetest.New(8, 2048, 40, 1<<16, sleeper{})
			eng.Cost = enginetest.CostModel{Step: 5 * time.Millisecond, PrefillToken: 500 * time.Microsecond, DecodeRow: 2 * time.Millisecond}
			eng.KeepPlans = true
			s, _, stop := startScheduler(t, eng, Config{})
			defer stop()
			arrived := make([]func(), 8)
			for i := range arrived {
				arrived[i] = s.Expect()
			}
			var wg sync.WaitGroup
			for i := range 8 {
				st, err := s.Submit(context.Background(), Request{Prompt: promptOf(i, 50), Class: Chat, MaxTokens: 4, Whole: whole})
				arrived[i]()
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					if _, res, err := st.Collect(context.Background()); err != nil || res.Err != nil {
						t.Errorf("request %d: %v / %v", i, err, res.Err)
					}
				})
				time.Sleep(3 * time.Millisecond) // the next HTTP request parsed
			}
			wg.Wait()
			first := len(eng.Plans[0].Prefills)
			if whole && first != 8 {
				t.Errorf("taken whole: the first step prefilled %d prompts; want the burst's 8", first)
			}
			if !whole && first != 1 {
				t.Errorf("streamed: the first step prefilled %d prompts; want the first request's alone, at once", first)
			}
		})
	}
}

// An idle runner waits for a burst only while announced requests are on
// their way: a lone request taken whole is admitted the moment it is
// submitted; one submitted while another request is announced waits until
// that one settles (here without submitting: it failed in its handler), or
// burstGatherMax when it never does. Virtual time, so the waits are exact.
func TestIdleRunnerWaitsOnlyForAnnouncedRequests(t *testing.T) {
	cases := []struct {
		name     string
		settle   time.Duration // when the other announced request settles; <0: none announced, 0: never
		wantWait time.Duration
	}{
		{"nothing announced", -1, 0},
		{"announced, settles after 4ms", 4 * time.Millisecond, 4 * time.Millisecond},
		{"announced, never settles", 0, burstGatherMax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := enginetest.New(8, 2048, 40, 1<<16, sleeper{})
				eng.Cost = enginetest.CostModel{Step: 5 * time.Millisecond, PrefillToken: 500 * time.Microsecond, DecodeRow: 2 * time.Millisecond}
				s, _, stop := startScheduler(t, eng, Config{})
				defer stop()
				if c.settle >= 0 {
					arrived := s.Expect()
					defer arrived()
					if c.settle > 0 {
						time.AfterFunc(c.settle, arrived)
					}
				}
				st, err := s.Submit(context.Background(), Request{Prompt: promptOf(1, 50), Class: Chat, MaxTokens: 2, Whole: true})
				if err != nil {
					t.Fatal(err)
				}
				_, res, err := st.Collect(context.Background())
				if err != nil || res.Err != nil {
					t.Fatalf("%v / %v", err, res.Err)
				}
				if res.QueueWait != c.wantWait {
					t.Errorf("queued %v before its admission; want %v", res.QueueWait, c.wantWait)
				}
			})
		})
	}
}
