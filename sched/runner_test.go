package sched

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// sleeper advances the bubble's clock: inside synctest.Test, time.Sleep
// takes no real time, and the runner's real clock reads the bubble's.
type sleeper struct{}

func (sleeper) Advance(d time.Duration) { time.Sleep(d) }

// startScheduler runs a scheduler over a fake engine in the current bubble.
func startScheduler(t *testing.T, eng *enginetest.Fake, cfg Config) (*Scheduler, *fakeCache, func()) {
	t.Helper()
	cache := newFakeCache(t, eng)
	s, err := New(eng, cache, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	return s, cache, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func TestManyConcurrentRequestsOfMixedClassesAllComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := enginetest.New(4, 512, 16, 1<<16, sleeper{})
		eng.EOGEvery = 400
		eng.Cost = enginetest.CostModel{Step: 5 * time.Millisecond, PrefillToken: 500 * time.Microsecond, DecodeRow: 2 * time.Millisecond}
		s, cache, stop := startScheduler(t, eng, Config{})
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				// A few share a long prefix, so the cache is exercised too.
				prompt := promptOf(i, 20+(i*37)%300)
				if i%5 == 0 {
					prompt = append(promptOf(1000, 200), prompt...)
				}
				class := Class(i % NumClasses)
				maxTokens := 10 + (i*7)%60
				if !class.interactive() {
					maxTokens *= 4
				}
				req := Request{Prompt: prompt, Class: class, MaxTokens: maxTokens, Logprobs: i % 3}
				time.Sleep(time.Duration(i) * 50 * time.Millisecond) // staggered arrivals
				st, err := s.Submit(context.Background(), req)
				if err != nil {
					t.Errorf("submit %d: %v", i, err)
					return
				}
				toks, res, err := st.Collect(context.Background())
				if err != nil || res.Err != nil {
					t.Errorf("request %d: %v / %v", i, err, res.Err)
					return
				}
				want := enginetest.Reference(req.Prompt, req.MaxTokens, eng.EOGEvery, nil, eng.Descriptor().Ctx)
				got := make([]engine.Token, len(toks))
				for k, tk := range toks {
					got[k] = tk.Token
					if len(tk.Top) != req.Logprobs {
						t.Errorf("request %d: %d top logprobs, asked %d", i, len(tk.Top), req.Logprobs)
						return
					}
				}
				if !equalTokens(got, want) {
					t.Errorf("request %d (%s): output differs from the reference\n got %v\nwant %v", i, req.Class, head(got), head(want))
				}
				if res.Generated != len(want) || res.PromptTokens != len(prompt) || res.TTFT <= 0 || res.TTFT < res.QueueWait {
					t.Errorf("request %d: result %+v", i, res)
				}
			})
		}
		wg.Wait()
		stop()
		snap := s.Stats()
		if snap.Completed != 32 || snap.LanesActive != 0 || snap.TTFTCount != 32 {
			t.Errorf("stats after: %+v", snap)
		}
		if snap.Preemptions == 0 {
			t.Error("no preemption: the mix of classes should have needed some")
		}
		if snap.WarmPrefixTokens == 0 {
			t.Error("no request started warm, though several share a prefix")
		}
		if cache.releases < 32 {
			t.Errorf("%d releases for 32 requests", cache.releases)
		}
		t.Logf("stats: %+v", snap)
		// synctest.Test fails if any goroutine is left behind.
	})
}

func TestCancellingTheSubmitContextCancelsTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		s, _, stop := startScheduler(t, eng, Config{})
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		st, err := s.Submit(ctx, Request{Prompt: promptOf(1, 30), Class: Chat, MaxTokens: 100000})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-st.Done()
		if r := st.Result(); r.Finish != FinishCancelled {
			t.Fatalf("result %+v", r)
		}
		for {
			if _, err := st.Next(context.Background()); err == io.EOF {
				break
			}
		}
		// And by ID.
		st2, _ := s.Submit(context.Background(), Request{Prompt: promptOf(2, 30), Class: Agent, MaxTokens: 100000})
		if _, err := st2.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !s.Cancel(st2.ID()) {
			t.Fatal("Cancel by ID found nothing")
		}
		<-st2.Done()
		if r := st2.Result(); r.Finish != FinishCancelled {
			t.Fatalf("result %+v", r)
		}
		synctest.Wait()
		if s.Cancel(st2.ID()) {
			t.Fatal("an ended request is still cancellable by ID")
		}
	})
}

func TestCloseFailsWhatIsInFlightAndRefusesMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := enginetest.New(1, 512, 4, 1<<16, sleeper{})
		s, cache, stop := startScheduler(t, eng, Config{})
		running, _ := s.Submit(context.Background(), Request{Prompt: promptOf(1, 30), Class: Agent, MaxTokens: 100000})
		queued, _ := s.Submit(context.Background(), Request{Prompt: promptOf(2, 30), Class: Agent, MaxTokens: 10})
		if _, err := running.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		stop()
		for _, st := range []*Stream{running, queued} {
			<-st.Done()
			if r := st.Result(); !errors.Is(r.Err, ErrClosed) {
				t.Errorf("result %+v", r)
			}
		}
		if _, err := s.Submit(context.Background(), Request{Prompt: promptOf(3, 3), Class: Chat}); !errors.Is(err, ErrClosed) {
			t.Errorf("submit after close: %v", err)
		}
		if eng.Lanes() != 0 {
			t.Errorf("%d lanes left in the engine", eng.Lanes())
		}
		if cache.releases == 0 {
			t.Error("the running lane's sequence was not given back")
		}
		if err := s.Run(context.Background()); err == nil {
			t.Error("Run twice should fail")
		}
	})
}

func TestRunningDeadlineWithTheRealClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		s, _, stop := startScheduler(t, eng, Config{})
		defer stop()
		deadline := time.Now().Add(700 * time.Millisecond)
		st, _ := s.Submit(context.Background(), Request{Prompt: promptOf(1, 30), Class: Agent, MaxTokens: 100000, Deadline: deadline})
		_, r, err := st.Collect(context.Background())
		if err != nil || r.Finish != FinishDeadline || r.Err != nil {
			t.Fatalf("%v %+v", err, r)
		}
		if over := time.Since(deadline); over > 50*time.Millisecond {
			t.Fatalf("the lane stopped %v after its deadline", over)
		}
	})
}

func TestSubmitRefusesWhatTheEngineWould(t *testing.T) {
	eng := enginetest.New(2, 512, 8, 100, nil)
	s, err := New(eng, newFakeCache(t, eng), Config{MaxQueued: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, req := range map[string]Request{
		"empty prompt":        {},
		"no room":             {Prompt: promptOf(1, 100)},
		"token out of vocab":  {Prompt: []engine.Token{enginetest.Vocab}},
		"logprobs":            {Prompt: []engine.Token{5}, Logprobs: 21},
		"class":               {Prompt: []engine.Token{5}, Class: 9},
		"top p":               {Prompt: []engine.Token{5}, Sampling: engine.Sampling{Temperature: 1, TopP: 0, RepeatPenalty: 1}},
		"bias":                {Prompt: []engine.Token{5}, Bias: []engine.LogitBias{{Token: -1}}},
		"negative max tokens": {Prompt: []engine.Token{5}, MaxTokens: -1},
		"huge penalty":        {Prompt: []engine.Token{5}, Sampling: engine.Sampling{Temperature: 1, TopP: 1, RepeatPenalty: 1, FrequencyPenalty: 2e6}},
		"bias bans all":       {Prompt: []engine.Token{5}, Bias: banAll()},
	} {
		if _, err := s.Submit(ctx, req); err == nil || !strings.HasPrefix(err.Error(), "sched: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for range 3 {
		if _, err := s.Submit(ctx, Request{Prompt: []engine.Token{5}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Submit(ctx, Request{Prompt: []engine.Token{5}}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a full queue: %v", err)
	}
}

func TestConfigIsValidatedUpFront(t *testing.T) {
	eng := enginetest.New(4, 512, 8, 4096, nil)
	cache := newFakeCache(t, eng)
	for _, c := range []struct {
		cfg Config
		msg string
	}{
		{Config{Lanes: 5}, "engine runs at most 4"},
		{Config{Lanes: -1}, "at least 1"},
		{Config{PrefillBudget: 10}, "prefill budget"},
		{Config{ClassLanes: ClassLanes{Agent: 5}}, "class lanes"},
		{Config{BackgroundDivisor: -1}, "background divisor"},
		{Config{StarvationSteps: -2}, "starvation"},
	} {
		if _, err := New(eng, cache, c.cfg); err == nil || !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "sched: ") {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.msg)
		}
	}
	if _, err := New(nil, cache, Config{}); err == nil {
		t.Error("nil engine")
	}
	small := enginetest.New(4, 2, 8, 4096, nil)
	if _, err := New(small, newFakeCache(t, small), Config{}); err == nil || !strings.Contains(err.Error(), "batch") {
		t.Errorf("batch smaller than the lanes: %v", err)
	}
	s, err := New(eng, cache, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Config(); c.Lanes != 4 || c.StarvationSteps != 64 || c.BackgroundDivisor != 1 {
		t.Errorf("defaults: %+v", c)
	}
}
