package task

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
	"superfluid/sched"
)

// seqCache is the least a scheduler needs of a prefix cache: a free
// sequence for each lane, nothing kept.
type seqCache struct {
	eng  *enginetest.Fake
	free []int32
}

func (c *seqCache) Acquire([]engine.Token) (int32, int, error) {
	if len(c.free) == 0 {
		return 0, 0, errors.New("seqCache: no free sequence")
	}
	s := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	return s, 0, nil
}

func (c *seqCache) Release(seq int32, _ []engine.Token) {
	_ = c.eng.Truncate(seq, 0)
	c.free = append(c.free, seq)
}

func (c *seqCache) Relieve() bool { return false }

// refusingAt submits to a real scheduler but refuses its refuseAt-th
// request as a full queue would, keeping the streams it handed out.
type refusingAt struct {
	*sched.Scheduler
	refuseAt int
	n        int
	streams  []*sched.Stream
}

func (r *refusingAt) Submit(ctx context.Context, req sched.Request) (*sched.Stream, error) {
	r.n++
	if r.n == r.refuseAt {
		return nil, sched.ErrQueueFull
	}
	st, err := r.Scheduler.Submit(ctx, req)
	if st != nil {
		r.streams = append(r.streams, st)
	}
	return st, err
}

// A refused choice fails the request as Overloaded and cancels every
// choice submitted before it: none of them generates for nobody.
func TestSubmitAllRollsBackOnRefusal(t *testing.T) {
	eng := enginetest.New(4, 64, 4, 256, nil)
	sc, err := sched.New(eng, &seqCache{eng: eng, free: []int32{3, 2, 1, 0}}, sched.Config{Lanes: 4})
	if err != nil {
		t.Fatal(err)
	}
	ref := &refusingAt{Scheduler: sc, refuseAt: 3}
	m := &Model{Name: "fake", Desc: eng.Descriptor(), Sched: ref}
	specs := make([]*Spec, 4)
	for i := range specs {
		specs[i] = &Spec{Prompt: []engine.Token{1, 5, 6, 7}, Class: sched.Chat, MaxTokens: 50, Sampling: engine.Greedy()}
	}
	sts, err := SubmitAll(context.Background(), m, specs)
	if e, ok := AsError(err); !ok || e.Kind != Overloaded || sts != nil {
		t.Fatalf("SubmitAll = %v, %v; want no streams and an Overloaded error", sts, err)
	}
	if ref.n != 3 || len(ref.streams) != 2 {
		t.Fatalf("%d submissions, %d streams; want the third refused and no fourth tried", ref.n, len(ref.streams))
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	for i, st := range ref.streams {
		<-st.Done()
		if r := st.Result(); r.Finish != sched.FinishCancelled || r.Generated != 0 {
			t.Errorf("choice %d before the refusal: %+v, want cancelled before generating", i, r)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A part that panics fails with an Internal error naming where, is told
// to ended at once, and the other parts still run to their ends.
func TestFanOutRecoversAPanic(t *testing.T) {
	var ran, endedCalls atomic.Int32
	errs := FanOut("choice", 4, func(i int) error {
		if i == 2 {
			panic("injected")
		}
		ran.Add(1)
		return nil
	}, func(err error) { endedCalls.Add(1) })
	if ran.Load() != 3 || endedCalls.Load() != 1 {
		t.Fatalf("%d parts ran, ended heard %d errors; want 3 and 1", ran.Load(), endedCalls.Load())
	}
	for i, err := range errs {
		e, ok := AsError(err)
		switch {
		case i == 2 && (!ok || e.Kind != Internal || !strings.Contains(e.Msg, "choice")):
			t.Errorf("the panicking part returned %v", err)
		case i != 2 && err != nil:
			t.Errorf("part %d: %v", i, err)
		}
	}
}

// The one completion-cache rule: greedy FIM without logprobs only, and a
// key that holds what changes the answer but not the seed.
func TestCacheKeyRule(t *testing.T) {
	m := &Model{Desc: &engine.Descriptor{Identity: "model-a"}}
	base := Spec{Prompt: []engine.Token{1, 2, 3}, Class: sched.FIM, MaxTokens: 8, Sampling: engine.Greedy()}
	key := func(edit func(s *Spec)) string {
		s := base
		edit(&s)
		return CacheKey(m, &s, "api")
	}
	k := key(func(*Spec) {})
	if k == "" {
		t.Fatal("a greedy FIM spec has no key")
	}
	if key(func(s *Spec) { s.Sampling.Seed = 99 }) != k {
		t.Error("the seed changed the key")
	}
	for name, edit := range map[string]func(s *Spec){
		"prompt":  func(s *Spec) { s.Prompt = []engine.Token{1, 2, 4} },
		"limit":   func(s *Spec) { s.MaxTokens = 9 },
		"stops":   func(s *Spec) { s.Stop = []string{"\n"} },
		"penalty": func(s *Spec) { s.Sampling.RepeatPenalty = 1.3 },
		"bias":    func(s *Spec) { s.Bias = []engine.LogitBias{{Token: 5, Bias: -1}} },
		"grammar": func(s *Spec) { s.Grammar = &engine.GrammarSpec{GBNF: `root ::= "a"`, Root: "root"} },
	} {
		if got := key(edit); got == "" || got == k {
			t.Errorf("%s: key %q", name, got)
		}
	}
	if CacheKey(&Model{Desc: &engine.Descriptor{Identity: "model-b"}}, &base, "api") == k || CacheKey(m, &base, "other") == k {
		t.Error("another model or API shares the key")
	}
	for name, edit := range map[string]func(s *Spec){
		"chat class": func(s *Spec) { s.Class = sched.Chat },
		"sampled":    func(s *Spec) { s.Sampling.Temperature = 0.7 },
		"logprobs":   func(s *Spec) { s.Logprobs = 1 },
	} {
		if got := key(edit); got != "" {
			t.Errorf("%s: key %q, want none", name, got)
		}
	}
}
