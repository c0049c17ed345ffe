package keys

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"superfluid/engine"
	"superfluid/engine/enginetest"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// freeSeqs is the least a scheduler needs of a prefix cache: a free
// sequence per lane, nothing kept.
type freeSeqs struct {
	eng  *enginetest.Fake
	free []int32
}

func (c *freeSeqs) Acquire([]engine.Token) (int32, int, error) {
	if len(c.free) == 0 {
		return 0, 0, errors.New("no free sequence")
	}
	s := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	return s, 0, nil
}

func (c *freeSeqs) Release(seq int32, _ []engine.Token) {
	_ = c.eng.Truncate(seq, 0)
	c.free = append(c.free, seq)
}

func (c *freeSeqs) Relieve() bool { return false }

// A generation through the keyed scheduler holds a lane and its estimate
// until the scheduler ends it; then the lane frees and the bucket is
// settled at what it really took (the prompt and the tokens generated).
func TestSchedulerSettlesAtTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := enginetest.New(2, 64, 2, 256, nil)
		sc, err := sched.New(eng, &freeSeqs{eng: eng, free: []int32{1, 0}}, sched.Config{Lanes: 2})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sc.Run(ctx) }()

		k := keeper(t, `{"keys": [{"name": "a", "key": "k", "max_lanes": 1, "tokens_per_minute": 1000}]}`, newClock())
		cl := k.Identify("k")
		r := cl.Request()
		keyed := Scheduler(sc, r, eng.Descriptor().Ctx)
		req := sched.Request{Prompt: []engine.Token{1, 5, 6, 7}, Class: sched.Chat, MaxTokens: 20, Sampling: engine.Greedy()}
		st, err := keyed.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if q := cl.Quota(); q.Tokens.Remaining != 1000-24 {
			t.Fatalf("while running: %d tokens left, want the estimate 4+20 charged", q.Tokens.Remaining)
		}
		if _, err := keyed.Submit(ctx, req); !isKind(err, task.RateLimited) {
			t.Fatalf("second generation over a cap of 1: %v", err)
		}
		toks, res, err := st.Collect(ctx)
		if err != nil || len(toks) == 0 {
			t.Fatal(err, len(toks))
		}
		synctest.Wait() // the settling goroutine has run
		if q := cl.Quota(); q.Tokens.Remaining != 1000-res.PromptTokens-res.Generated {
			t.Fatalf("after the end: %d tokens left, want 1000-%d-%d", q.Tokens.Remaining, res.PromptTokens, res.Generated)
		}
		if _, err := keyed.Submit(ctx, req); !isKind(err, task.RateLimited) {
			t.Fatalf("the generation ended, its request has not: %v", err)
		}
		r.End()
		st2, err := Scheduler(sc, cl.Request(), eng.Descriptor().Ctx).Submit(ctx, req)
		if err != nil {
			t.Fatalf("after the lane freed: %v", err)
		}
		st2.Cancel()
		<-st2.Done()
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// A submission the scheduler refuses frees its lane and refunds its
// estimate at once; a class the key leaves out never reaches the
// scheduler.
func TestSchedulerRefusals(t *testing.T) {
	m, stub := tasktest.StubModel(t)
	k := keeper(t, `{"keys": [{"name": "a", "key": "k", "classes": ["agent"], "max_lanes": 1, "tokens_per_minute": 100}]}`, newClock())
	cl := k.Identify("k")
	r := cl.Request()
	defer r.End()
	keyed := Scheduler(m.Sched, r, m.Desc.Ctx)
	req := sched.Request{Prompt: []engine.Token{1, 2}, Class: sched.Agent, MaxTokens: 10}
	for range 3 {
		if _, err := keyed.Submit(context.Background(), req); !errors.Is(err, tasktest.ErrStubRefused) {
			t.Fatalf("want the scheduler's own refusal each time (the lane freed), got %v", err)
		}
	}
	if q := cl.Quota(); q.Tokens.Remaining != 100 {
		t.Fatalf("refused submissions kept %d tokens", 100-q.Tokens.Remaining)
	}
	req.Class = sched.Chat
	if _, err := keyed.Submit(context.Background(), req); !isKind(err, task.Forbidden) {
		t.Fatalf("chat: %v", err)
	}
	if n := len(stub.Taken()); n != 3 {
		t.Fatalf("the scheduler saw %d submissions, want 3 (not the forbidden one)", n)
	}
}

// countingEmbedder embeds nothing and counts its calls.
type countingEmbedder struct {
	task.Embedder
	calls int
}

func (e *countingEmbedder) Embed(_ context.Context, inputs [][]engine.Token, _ sched.Class) ([][]float32, error) {
	e.calls++
	return make([][]float32, len(inputs)), nil
}

// An embedding is admitted by the key's class and charged its inputs
// whole; a refused one never reaches the runner.
func TestEmbedderChargesItsInputs(t *testing.T) {
	k := keeper(t, `{"keys": [{"name": "a", "key": "k", "classes": ["background"], "tokens_per_minute": 10}]}`, newClock())
	cl := k.Identify("k")
	inner := &countingEmbedder{}
	e := Embedder(inner, cl)
	inputs := [][]engine.Token{{1, 2, 3}, {4, 5, 6}}
	if _, err := e.Embed(context.Background(), inputs, sched.Background); err != nil {
		t.Fatal(err)
	}
	if q := cl.Quota(); q.Tokens.Remaining != 4 {
		t.Fatalf("%d tokens left, want 10-6", q.Tokens.Remaining)
	}
	if _, err := e.Embed(context.Background(), inputs, sched.Background); !isKind(err, task.RateLimited) {
		t.Fatalf("over the tokens: %v", err)
	}
	if _, err := e.Embed(context.Background(), inputs[:1], sched.Chat); !isKind(err, task.Forbidden) {
		t.Fatalf("chat class: %v", err)
	}
	if inner.calls != 1 {
		t.Fatalf("the runner ran %d times, want once", inner.calls)
	}
}
