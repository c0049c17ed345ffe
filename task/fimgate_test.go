package task

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
	"superfluid/sched"
)

func TestBucketRefillsAtItsRateInVirtualTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBucket(4, 3) // a token every 250 ms, three at once
	for i := range 3 {
		if ok, _ := b.Take(t0); !ok {
			t.Fatalf("take %d of a full burst of 3 refused", i+1)
		}
	}
	ok, wait := b.Take(t0)
	if ok || wait != 250*time.Millisecond {
		t.Fatalf("fourth take at once: ok=%v wait=%v, want refused with 250ms", ok, wait)
	}
	// 100 ms later: 0.4 of a token, 150 ms still to go.
	if ok, wait := b.Take(t0.Add(100 * time.Millisecond)); ok || wait != 150*time.Millisecond {
		t.Fatalf("at +100ms: ok=%v wait=%v, want refused with 150ms", ok, wait)
	}
	// Retrying after the time told is admitted.
	if ok, _ := b.Take(t0.Add(250 * time.Millisecond)); !ok {
		t.Fatal("a retry after the time told was refused")
	}
	// A long idle fills it to the burst, never beyond.
	later := t0.Add(time.Hour)
	for i := range 3 {
		if ok, _ := b.Take(later); !ok {
			t.Fatalf("after an hour idle, take %d refused", i+1)
		}
	}
	if ok, _ := b.Take(later); ok {
		t.Fatal("the bucket held more than its burst")
	}
	// A clock stepping back adds nothing and breaks nothing.
	if ok, wait := b.Take(t0); ok || wait <= 0 {
		t.Fatalf("clock stepped back: ok=%v wait=%v, want refused with a positive wait", ok, wait)
	}
}

func TestBucketShedsAStormToItsRate(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := NewBucket(DefaultFIMRate, DefaultFIMBurst)
	admitted := 0
	// An editor at 20 requests a second for 10 s.
	for i := range 200 {
		if ok, _ := b.Take(t0.Add(time.Duration(i) * 50 * time.Millisecond)); ok {
			admitted++
		}
	}
	// The burst, then the rate over the 9.95 s after the first.
	rate := float64(DefaultFIMRate)
	want := DefaultFIMBurst + int(9.95*rate)
	if admitted < want-1 || admitted > want+1 {
		t.Fatalf("admitted %d of 200, want about %d (burst %d + rate %d/s)", admitted, want, DefaultFIMBurst, DefaultFIMRate)
	}
}

func TestFIMRateValidate(t *testing.T) {
	for _, r := range []FIMRate{{}, {Rate: 20, Burst: 1}, {Rate: -1}} {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v refused: %v", r, err)
		}
	}
	for _, r := range []FIMRate{{Burst: -3}, {Rate: 1e-9}} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

// fimModel is a model over a scheduler that does not run until the test
// starts it: what Start submits waits in its queue.
func fimModel(t *testing.T, gate *FIMGate) (*Model, func()) {
	t.Helper()
	eng := enginetest.New(4, 64, 4, 512, nil)
	sc, err := sched.New(eng, &seqCache{eng: eng, free: []int32{3, 2, 1, 0}}, sched.Config{Lanes: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	run := func() { go func() { done <- sc.Run(ctx) }() }
	return &Model{Name: "fake", Desc: eng.Descriptor(), Text: numberText{}, Sched: sc, FIMGate: gate}, run
}

func oneSink() *recordingSink {
	return &recordingSink{text: make([]strings.Builder, 1), ended: make([]int, 1)}
}

func fimRequest(class sched.Class) *Request {
	return &Request{Spec: Spec{Prompt: []engine.Token{1, 2, 3}, Class: class, MaxTokens: 2}, Collect: true}
}

func TestStartShedsFIMPastTheBucketWithARetryTime(t *testing.T) {
	now := time.Unix(50, 0)
	gate := NewFIMGate(FIMRate{Rate: 2, Burst: 2}, func() time.Time { return now })
	m, run := fimModel(t, gate)
	run()
	ctx := context.Background()
	for i := range 2 {
		j, err := Start(ctx, m, fimRequest(sched.FIM))
		if err != nil {
			t.Fatalf("FIM %d within the burst: %v", i+1, err)
		}
		j.Cancel()
	}
	_, err := Start(ctx, m, fimRequest(sched.FIM))
	te, ok := AsError(err)
	if !ok || te.Kind != Throttled || te.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third FIM at once: %v (%+v), want Throttled with a retry of 500ms", err, te)
	}
	if gate.Shed() != 1 {
		t.Fatalf("shed counted %d, want 1", gate.Shed())
	}
	// Other classes never pass the gate.
	j, err := Start(ctx, m, fimRequest(sched.Chat))
	if err != nil {
		t.Fatalf("a chat request beside an empty FIM bucket: %v", err)
	}
	j.Cancel()
	now = now.Add(500 * time.Millisecond)
	if j, err = Start(ctx, m, fimRequest(sched.FIM)); err != nil {
		t.Fatalf("FIM retried after the time told: %v", err)
	}
	j.Cancel()
}

func TestANewerFIMFromTheSameClientSupersedesItsQueuedOne(t *testing.T) {
	gate := NewFIMGate(FIMRate{Rate: -1}, nil)
	m, run := fimModel(t, gate)
	editor, other := WithClient(context.Background(), "editor"), WithClient(context.Background(), "other")
	stale, err := Start(editor, m, fimRequest(sched.FIM))
	if err != nil {
		t.Fatal(err)
	}
	bystander, err := Start(other, m, fimRequest(sched.FIM))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Start(editor, m, fimRequest(sched.FIM))
	if err != nil {
		t.Fatal(err)
	}
	run() // only now do the queued requests meet a lane
	ctx := context.Background()
	turns, err := stale.Run(ctx, oneSink())
	if te, ok := AsError(err); !ok || te.Kind != Superseded || turns[0].Completed != 0 || !errors.Is(turns[0].Result.Err, sched.ErrCancelled) {
		t.Fatalf("the superseded completion: %v, %+v; want it answered Superseded, cancelled before it started", err, turns)
	}
	for name, j := range map[string]*Job{"the newer completion": fresh, "another client's": bystander} {
		turns, err := j.Run(ctx, oneSink())
		if err != nil || turns[0].Outcome.Completed != 2 {
			t.Fatalf("%s: %v, %+v; want it run to its 2 tokens", name, err, turns)
		}
	}
	if gate.Superseded() != 1 {
		t.Fatalf("superseded counted %d, want 1", gate.Superseded())
	}
	// A completion that has ended is left alone (a running one is
	// cancelled: e2e TestANewerFIMCancelsTheClientsRunningOne).
	started, err := Start(editor, m, fimRequest(sched.FIM))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := started.Run(ctx, oneSink()); err != nil {
		t.Fatal(err)
	}
	if j, err := Start(editor, m, fimRequest(sched.FIM)); err != nil {
		t.Fatal(err)
	} else {
		j.Cancel()
	}
	if gate.Superseded() != 1 {
		t.Fatalf("superseded counted %d after an ended completion's successor, want still 1", gate.Superseded())
	}
}
