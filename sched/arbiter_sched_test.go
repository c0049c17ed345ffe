package sched

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// tickLog records, across engines, every step that decoded something: the
// arbiter's promise is that no two of them overlap.
type tickLog struct {
	mu    sync.Mutex
	ticks []loggedTick
}

type loggedTick struct {
	engine     string
	start, end time.Time
	prefill    int
}

// loggedEngine is a fake engine whose decoding steps go into a tickLog.
type loggedEngine struct {
	*enginetest.Fake
	name string
	log  *tickLog
}

func (e *loggedEngine) Tick(p *engine.Plan) (*engine.Events, error) {
	start := time.Now()
	prefill := 0
	for _, f := range p.Prefills {
		prefill += int(f.Count)
	}
	decodes := len(p.Decodes)
	ev, err := e.Fake.Tick(p)
	if prefill+decodes > 0 {
		e.log.mu.Lock()
		e.log.ticks = append(e.log.ticks, loggedTick{engine: e.name, start: start, end: time.Now(), prefill: prefill})
		e.log.mu.Unlock()
	}
	return ev, err
}

func (l *tickLog) snapshot() []loggedTick {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedTick(nil), l.ticks...)
}

// checkNoOverlap fails if two engines' steps ran at once.
func checkNoOverlap(t *testing.T, ticks []loggedTick) {
	t.Helper()
	for i := 1; i < len(ticks); i++ {
		if ticks[i].start.Before(ticks[i-1].end) {
			t.Fatalf("steps overlap: %s %v–%v and %s from %v", ticks[i-1].engine, ticks[i-1].start, ticks[i-1].end, ticks[i].engine, ticks[i].start)
		}
	}
}

// startOn runs a scheduler over eng (fake's cache) in the current bubble;
// stop cancels it and waits for Run.
func startOn(t *testing.T, eng engine.Engine, fake *enginetest.Fake, cfg Config) (*Scheduler, func()) {
	t.Helper()
	s, err := New(eng, newFakeCache(t, fake), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	return s, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// bigBesideSmall runs two fake engines under one arbiter in the current
// bubble, their steps in one log: "big" with one lane (so a background
// prompt alone fills its steps: no newcomer of its own could join) and
// "small" with two, both at batch tokens a step, big at bigCost. stop
// ends both schedulers.
func bigBesideSmall(t *testing.T, batch int, bigCost enginetest.CostModel) (sBig, sSmall *Scheduler, log *tickLog, stop func()) {
	t.Helper()
	arb := NewArbiter(ArbiterConfig{})
	log = &tickLog{}
	big := enginetest.New(1, batch, 4, 1<<16, sleeper{})
	big.Cost = bigCost
	small := enginetest.New(2, batch, 8, 1<<16, sleeper{})
	sBig, stopBig := startOn(t, &loggedEngine{big, "big", log}, big, Config{Arbiter: arb.Join("big")})
	sSmall, stopSmall := startOn(t, &loggedEngine{small, "small", log}, small, Config{Arbiter: arb.Join("small")})
	return sBig, sSmall, log, func() { stopSmall(); stopBig() }
}

func TestFIMOnOneEngineWaitsAtMostOneBackgroundStepOfAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Alone, the big engine's background prompt would fill its
		// 512-token batch each step.
		sBig, sSmall, log, stop := bigBesideSmall(t, 512, enginetest.CPUCost)
		defer stop()

		ctx := context.Background()
		bg, err := sBig.Submit(ctx, Request{Prompt: promptOf(1, 2000), Class: Background, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second) // past the first step, which learns the prefill rate
		submitted := time.Now()
		fimReq := Request{Prompt: promptOf(2, 100), Class: FIM, MaxTokens: 8}
		fim, err := sSmall.Submit(ctx, fimReq)
		if err != nil {
			t.Fatal(err)
		}
		_, r, err := fim.Collect(ctx)
		if err != nil || r.Err != nil {
			t.Fatalf("fim: %v %+v", err, r)
		}
		fimEnd := time.Now()
		if _, rb, err := bg.Collect(ctx); err != nil || rb.Err != nil {
			t.Fatalf("background: %v %+v", err, rb)
		}

		ticks := log.snapshot()
		checkNoOverlap(t, ticks)
		var longestBig time.Duration
		for i, tk := range ticks {
			if tk.engine != "big" {
				continue
			}
			if i > 0 && tk.prefill > joinWaitMinTokens {
				t.Errorf("big step %d prefilled %d tokens beside another engine; want at most %d", i, tk.prefill, joinWaitMinTokens)
			}
			if i > 0 {
				longestBig = max(longestBig, tk.end.Sub(tk.start))
			}
			if tk.start.After(submitted) && tk.start.Before(fimEnd) {
				t.Errorf("a big background step started at %v, while the FIM request (%v–%v) ran", tk.start, submitted, fimEnd)
			}
		}
		// Alone, the FIM request's first token comes after its prefill
		// step; beside the big engine, after at most one big step more.
		alone := enginetest.CPUCost.Step + time.Duration(len(fimReq.Prompt))*enginetest.CPUCost.PrefillToken
		if r.TTFT > longestBig+alone {
			t.Fatalf("FIM TTFT %v; want at most one big step (%v) + its own prefill (%v)", r.TTFT, longestBig, alone)
		}
		if longestBig > time.Second {
			t.Fatalf("big steps up to %v beside another engine; want about joinWaitSecs", longestBig)
		}
		if snap := sSmall.Stats(); snap.TurnWaits == 0 || snap.TurnWaitMS == 0 {
			t.Fatalf("the FIM engine's waits are not counted: %+v", snap)
		}
		t.Logf("FIM TTFT %v (alone %v), longest big step %v", r.TTFT, alone, longestBig)
	})
}

func TestBackgroundOnOneEngineProgressesBesideChatOnAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 8
		arb := NewArbiter(ArbiterConfig{StarvationTurns: bound})
		log := &tickLog{}
		a := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		b := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		sa, stopA := startOn(t, &loggedEngine{a, "a", log}, a, Config{Arbiter: arb.Join("a")})
		defer stopA()
		sb, stopB := startOn(t, &loggedEngine{b, "b", log}, b, Config{Arbiter: arb.Join("b")})
		defer stopB()

		ctx := context.Background()
		chat, _ := sa.Submit(ctx, Request{Prompt: promptOf(1, 50), Class: Chat, MaxTokens: 600})
		time.Sleep(time.Second)
		bgReq := Request{Prompt: promptOf(2, 100), Class: Background, MaxTokens: 20}
		bg, _ := sb.Submit(ctx, bgReq)
		toks, rb, err := bg.Collect(ctx)
		if err != nil || rb.Err != nil || len(toks) != bgReq.MaxTokens {
			t.Fatalf("background: %d tokens, %v %+v", len(toks), err, rb)
		}
		select {
		case <-chat.Done():
			t.Fatal("the chat reply ended first: the test shows nothing")
		default:
		}
		if _, rc, err := chat.Collect(ctx); err != nil || rc.Err != nil {
			t.Fatalf("chat: %v %+v", err, rc)
		}

		ticks := log.snapshot()
		checkNoOverlap(t, ticks)
		first, last := -1, -1
		for i, tk := range ticks {
			if tk.engine == "b" {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		run, longest := 0, 0
		for _, tk := range ticks[first : last+1] {
			if tk.engine == "a" {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		// The step in flight when b began to wait, then bound grants.
		if longest > bound+1 {
			t.Fatalf("a ran %d steps in a row while b waited; the bound is %d", longest, bound+1)
		}
		if longest < bound {
			t.Fatalf("a ran at most %d steps in a row: chat did not go first", longest)
		}
	})
}

func TestLeavingTheArbiterStopsAWaitingScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		arb := NewArbiter(ArbiterConfig{})
		other := arb.Join("other")
		if err := other.Acquire(context.Background(), Background); err != nil {
			t.Fatal(err)
		}
		eng := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		turn := arb.Join("model")
		s, stop := startOn(t, eng, eng, Config{Arbiter: turn})
		st, err := s.Submit(context.Background(), Request{Prompt: promptOf(1, 30), Class: FIM, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !other.Contended() {
			t.Fatal("the scheduler does not wait for its turn")
		}
		turn.Leave()
		<-st.Done()
		if r := st.Result(); !errors.Is(r.Err, ErrClosed) {
			t.Fatalf("result %+v", r)
		}
		stop() // Run has returned nil
		other.Release()
		if eng.Lanes() != 0 {
			t.Fatalf("%d lanes left in the engine", eng.Lanes())
		}
	})
}

func TestStoppingAWaitingSchedulerWithdrawsItsClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		arb := NewArbiter(ArbiterConfig{})
		other := arb.Join("other")
		if err := other.Acquire(context.Background(), Background); err != nil {
			t.Fatal(err)
		}
		eng := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		s, stop := startOn(t, eng, eng, Config{Arbiter: arb.Join("model")})
		st, _ := s.Submit(context.Background(), Request{Prompt: promptOf(1, 30), Class: Chat, MaxTokens: 4})
		synctest.Wait()
		if !other.Contended() {
			t.Fatal("the scheduler does not wait for its turn")
		}
		stop()
		if r := st.Result(); !errors.Is(r.Err, ErrClosed) {
			t.Fatalf("result %+v", r)
		}
		if other.Contended() {
			t.Fatal("a stopped scheduler still claims the next step")
		}
		other.Release()
		if err := other.Acquire(context.Background(), Background); err != nil {
			t.Fatal(err)
		}
		other.Release()
	})
}

// A lone engine under an arbiter plans exactly as without one.
func TestLoneEngineUnderAnArbiterPlansAsWithout(t *testing.T) {
	run := func(cfg Config) []engine.Plan {
		h := newHarness(t, 4, 64, cfg)
		h.eng.KeepPlans = true
		h.submit("bg", Request{Prompt: promptOf(1, 700), Class: Background, MaxTokens: 40})
		h.submit("agent", Request{Prompt: promptOf(2, 300), Class: Agent, MaxTokens: 30})
		for range 6 {
			h.step()
		}
		h.submit("chat", Request{Prompt: promptOf(3, 120), Class: Chat, MaxTokens: 25})
		h.submit("fim", Request{Prompt: promptOf(4, 60), Class: FIM, MaxTokens: 12})
		for range 4 {
			h.step()
		}
		h.submit("bg2", Request{Prompt: promptOf(5, 400), Class: Background, MaxTokens: 20})
		h.submit("chat2", Request{Prompt: promptOf(6, 30), Class: Chat, MaxTokens: 10})
		h.run(10000)
		for name := range h.jobs {
			if r := h.result(name); r.Err != nil || r.Generated == 0 {
				t.Fatalf("%s: %+v", name, r)
			}
		}
		return h.eng.Plans
	}
	without := run(Config{})
	turn := NewArbiter(ArbiterConfig{}).Join("alone")
	with := run(Config{Arbiter: turn})
	if len(without) < 20 {
		t.Fatalf("only %d plans: the workload shows nothing", len(without))
	}
	if !reflect.DeepEqual(without, with) {
		for i := range min(len(without), len(with)) {
			if !reflect.DeepEqual(without[i], with[i]) {
				t.Fatalf("plan %d differs under an arbiter:\nwithout %+v\n   with %+v", i, without[i], with[i])
			}
		}
		t.Fatalf("%d plans without an arbiter, %d with", len(without), len(with))
	}
	if turn.Contended() {
		t.Fatal("contended alone")
	}
}

// A Chat request arriving at an engine that waits its turn with
// background work raises its claim: it does not wait out the other
// engine's chat reply.
func TestChatArrivingAtAWaitingEngineRaisesItsClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		arb := NewArbiter(ArbiterConfig{})
		log := &tickLog{}
		a := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		b := enginetest.New(2, 512, 8, 1<<16, sleeper{})
		sa, stopA := startOn(t, &loggedEngine{a, "a", log}, a, Config{Arbiter: arb.Join("a")})
		defer stopA()
		sb, stopB := startOn(t, &loggedEngine{b, "b", log}, b, Config{Arbiter: arb.Join("b")})
		defer stopB()

		ctx := context.Background()
		chatA, _ := sa.Submit(ctx, Request{Prompt: promptOf(1, 50), Class: Chat, MaxTokens: 400})
		time.Sleep(time.Second)
		bg, _ := sb.Submit(ctx, Request{Prompt: promptOf(2, 100), Class: Background, MaxTokens: 200})
		time.Sleep(2 * time.Second) // b waits with its background lane, passed over by a's chat
		chatReq := Request{Prompt: promptOf(3, 50), Class: Chat, MaxTokens: 5}
		chatB, _ := sb.Submit(ctx, chatReq)
		_, r, err := chatB.Collect(ctx)
		if err != nil || r.Err != nil {
			t.Fatalf("chat on b: %v %+v", err, r)
		}
		// At most one of a's decode steps, then b's step carrying the
		// prompt beside its background lane's token.
		c := enginetest.CPUCost
		want := (c.Step + c.DecodeRow) + c.Step + time.Duration(len(chatReq.Prompt))*c.PrefillToken + 2*c.DecodeRow
		if r.TTFT > want {
			t.Fatalf("chat on b: TTFT %v, want at most %v", r.TTFT, want)
		}
		for _, st := range []*Stream{chatA, bg} {
			if _, res, err := st.Collect(ctx); err != nil || res.Err != nil {
				t.Fatalf("%v %+v", err, res)
			}
		}
		checkNoOverlap(t, log.snapshot())
	})
}

// An editor on one engine sends completion after completion while another
// engine prefills a background prompt at the CPU's 64-token batch: after
// the first request, the background steps shrink below 64 tokens, so each
// later request waits out a step of about interactiveWaitSecs, not a
// whole 64-token one; once the editor has been quiet for
// interactiveWindow, the steps are whole again.
func TestBackgroundStepsShrinkWhileAnEditorWorksOnAnotherEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sBig, sSmall, log, stop := bigBesideSmall(t, 64, enginetest.CPUCost)
		defer stop()

		ctx := context.Background()
		bg, err := sBig.Submit(ctx, Request{Prompt: promptOf(1, 6000), Class: Background, MaxTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // the big engine learns its prefill rate
		const edits = 6
		var ttfts []time.Duration
		var secondSubmitted, lastEnd time.Time
		for i := range edits {
			time.Sleep(300 * time.Millisecond)
			if i == 1 {
				secondSubmitted = time.Now()
			}
			fim, err := sSmall.Submit(ctx, Request{Prompt: promptOf(10+i, 48), Class: FIM, MaxTokens: 8})
			if err != nil {
				t.Fatal(err)
			}
			_, r, err := fim.Collect(ctx)
			if err != nil || r.Err != nil {
				t.Fatalf("fim %d: %v %+v", i, err, r)
			}
			ttfts = append(ttfts, r.TTFT)
			lastEnd = time.Now()
		}
		time.Sleep(interactiveWindow + 3*time.Second)
		bg.Cancel()

		alone := enginetest.CPUCost.Step + 48*enginetest.CPUCost.PrefillToken
		for i, d := range ttfts[1:] {
			if d > alone+250*time.Millisecond {
				t.Errorf("FIM %d: TTFT %v; want within 250ms of its own prefill (%v)", i+1, d, alone)
			}
		}
		ticks := log.snapshot()
		checkNoOverlap(t, ticks)
		whole := false
		for _, tk := range ticks {
			if tk.engine != "big" {
				continue
			}
			if tk.start.After(secondSubmitted) && tk.start.Before(lastEnd) && tk.prefill > 16 {
				t.Errorf("big step at %v prefilled %d tokens while the editor worked; want at most 16", tk.start, tk.prefill)
			}
			if tk.start.After(lastEnd.Add(interactiveWindow+time.Second)) && tk.prefill == 64 {
				whole = true
			}
		}
		if !whole {
			t.Errorf("no whole 64-token background step once the editor had been quiet for %v", interactiveWindow)
		}
		t.Logf("FIM TTFTs %v (alone %v)", ttfts, alone)
	})
}
