package cgo

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"superfluid/engine"
)

// Engines with the same threads and poll compute on one pool of threads
// (native/compute.cpp). Two of them stepping from two goroutines at once
// take the pool in turn: each generates what it generates alone. Without
// the pool's lock both would kick the same workers at once, and the run
// would hang, crash or corrupt a step.
func TestEnginesSharingAThreadPoolTakeItInTurn(t *testing.T) {
	open := func() *Engine {
		e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 1024, Lanes: 2, Seqs: 2, Batch: 64, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	a, b := open(), open()
	prompts := func(e *Engine, salt string) [][]engine.Token {
		return [][]engine.Token{promptTokens(t, e, 90, salt+"1"), promptTokens(t, e, 40, salt+"2")}
	}
	pa, pb := prompts(a, "a"), prompts(b, "b")
	wantA := generate(t, a, pa, 24, 16, engine.Greedy())
	wantB := generate(t, b, pb, 24, 16, engine.Greedy())

	const rounds = 4
	var wg sync.WaitGroup
	got := make([][][][]engine.Token, 2)
	for i, run := range []struct {
		e       *Engine
		prompts [][]engine.Token
	}{{a, pa}, {b, pb}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				got[i] = append(got[i], generate(t, run.e, run.prompts, 24, 16, engine.Greedy()))
			}
		}()
	}
	wg.Wait()
	for i, want := range [][][]engine.Token{wantA, wantB} {
		if len(got[i]) != rounds {
			t.Fatalf("engine %d ran %d of %d rounds", i, len(got[i]), rounds)
		}
		for r, out := range got[i] {
			for lane := range want {
				if !slices.Equal(out[lane], want[lane]) {
					t.Errorf("engine %d, round %d, lane %d: %v beside the other engine, %v alone", i, r, lane, out[lane], want[lane])
				}
			}
		}
	}
}

// The polling level is llama.cpp's 0-100 and the threads at most ggml's
// 512; anything else is refused by name.
func TestPollOrThreadsOutsideTheirRangeAreRefused(t *testing.T) {
	for _, poll := range []int{101, 1 << 30, -3} {
		e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 256, Lanes: 1, Seqs: 1, Threads: 1, Poll: poll})
		if err == nil {
			e.Close()
			t.Errorf("poll %d: opened", poll)
		} else if !strings.Contains(err.Error(), "poll") {
			t.Errorf("poll %d: %v, want a reason naming poll", poll, err)
		}
	}
	// ggml would start this many threads for every step (or for the pool).
	if e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 256, Lanes: 1, Seqs: 1, Threads: 100000}); err == nil {
		e.Close()
		t.Error("100,000 threads: opened")
	} else if !strings.Contains(err.Error(), "threads") {
		t.Errorf("100,000 threads: %v, want a reason naming threads", err)
	}
	for _, poll := range []int{PollOff, PollNone, 1, 100} {
		e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 256, Lanes: 1, Seqs: 1, Threads: 1, Poll: poll})
		if err != nil {
			t.Errorf("poll %d: %v", poll, err)
			continue
		}
		e.Close()
	}
}
