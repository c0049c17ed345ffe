package tracing

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"superfluid/sched"
)

// discardExporter takes every batch and keeps nothing.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkRequestSpans is what tracing one request costs: its HTTP span,
// and its generation's spans as the scheduler tells them — queue,
// admission, eight prefill steps, decode, publish, end — through the
// batch processor to an exporter that discards them. The scheduler's
// goroutine pays the observer calls; compare with a step's time (ms).
func BenchmarkRequestSpans(b *testing.B) {
	tr := newTracing(discardExporter{}, nil, defaultQueue)
	defer tr.Shutdown(context.Background())
	obs := tr.Scheduler("bench")
	t0 := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		r := tr.StartRequest("openai", "POST", "/v1/chat/completions", nil)
		ctx, release := r.Context(context.Background())
		j := obs.Start(ctx, sched.ObservedRequest{Class: sched.Chat, PromptTokens: 4096, MaxTokens: 256, Submitted: t0})
		j.Admitted(sched.Admission{Start: t0, End: t0, Cached: 1024, Tier: "resident"})
		for range 8 {
			j.Prefilled(t0, t0, 384)
		}
		j.Decoding(t0)
		j.Published(t0, t0, 4351, false)
		j.Ended(t0, sched.Result{Finish: sched.FinishLength, Generated: 256})
		release()
		r.Done()
		if tr.Stats().Dropped > 0 {
			b.StopTimer()
			tr.ForceFlush(context.Background())
			b.StartTimer()
		}
	}
}
