package task

import (
	"context"
	"testing"

	"superfluid/engine"
	"superfluid/sched"
)

// wholeRecorder refuses every submission, keeping whether it was taken
// whole.
type wholeRecorder struct{ whole []bool }

func (w *wholeRecorder) Submit(_ context.Context, req sched.Request) (*sched.Stream, error) {
	w.whole = append(w.whole, req.Whole)
	return nil, sched.ErrQueueFull
}

func (w *wholeRecorder) Stats() sched.Snapshot { return sched.Snapshot{} }

// Expect: no runner here gathers bursts.
func (w *wholeRecorder) Expect() func() { return func() {} }

// Work submitted under the streamed response's context reaches the
// scheduler as streamed; any other (an answer given whole, a batch job)
// as taken whole, which lets the scheduler prefill its neighbours beside it.
func TestSubmitTellsTheSchedulerWhetherTheReplyStreams(t *testing.T) {
	rec := &wholeRecorder{}
	m := &Model{Name: "fake", Desc: &engine.Descriptor{}, Sched: rec}
	spec := &Spec{Prompt: []engine.Token{1, 2}, Class: sched.Chat}
	_, _ = Submit(context.Background(), m, spec)
	_, _ = Submit(Streaming(context.Background()), m, spec)
	if len(rec.whole) != 2 || !rec.whole[0] || rec.whole[1] {
		t.Fatalf("whole per submission = %v; want [true false] (whole, then streamed)", rec.whole)
	}
}
