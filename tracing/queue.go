package tracing

import (
	"context"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"superfluid/metric"
)

var (
	spansDropped   = metric.Counter("superfluid_trace_spans_dropped_total", "Spans dropped because the export queue was full.")
	spansExported  = metric.Counter("superfluid_trace_spans_exported_total", "Spans the OTLP collector accepted.")
	spansFailed    = metric.Counter("superfluid_trace_spans_export_failed_total", "Spans whose export failed (the collector refused them or could not be reached).")
	spansQueued    = metric.Gauge("superfluid_trace_queue_spans", "Spans ended and not yet exported.")
	spansQueueSize = metric.Gauge("superfluid_trace_queue_max_spans", "The export queue's bound (OTEL_BSP_MAX_QUEUE_SIZE).")
)

// queueCount bounds the spans between their end and their export, and
// counts them. The batch processor drops a span silently when its queue is
// full; so the bound is kept here, in front of it, where a drop can be
// counted: a span is let in only while fewer than max are in flight (in
// the processor's queue, in the batch it is assembling, or being
// exported), so the processor's own queue, of the same size, never fills.
type queueCount struct {
	max      int64
	inFlight atomic.Int64
	dropped  atomic.Uint64
	exported atomic.Uint64
	failed   atomic.Uint64
}

// boundedProcessor is the batch processor behind the bound.
type boundedProcessor struct {
	sdktrace.SpanProcessor
	q *queueCount
}

// OnEnd lets a sampled span into the batch processor, or drops it when
// the queue is full. It never blocks the goroutine that ended the span
// (the scheduler's, for its spans).
func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if p.q.inFlight.Add(1) > p.q.max {
		p.q.inFlight.Add(-1)
		p.q.dropped.Add(1)
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// countingExporter counts the spans leaving the queue.
type countingExporter struct {
	next sdktrace.SpanExporter
	q    *queueCount
}

// ExportSpans exports a batch; its spans count as in flight until the
// export returns, so a stalled collector fills the bound and later spans
// are dropped, counted, rather than held.
func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.next.ExportSpans(ctx, spans)
	if err != nil {
		e.q.failed.Add(uint64(len(spans)))
	} else {
		e.q.exported.Add(uint64(len(spans)))
	}
	e.q.inFlight.Add(-int64(len(spans)))
	return err
}

func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

// Stats are the export queue's counts.
type Stats struct {
	Dropped, Exported, Failed uint64
	Queued, Max               int64
}

// Stats reads the queue's counts; zero when tracing is off.
func (t *Tracing) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	q := t.queue
	return Stats{Dropped: q.dropped.Load(), Exported: q.exported.Load(), Failed: q.failed.Load(), Queued: q.inFlight.Load(), Max: q.max}
}

// AddMetrics adds the export queue's samples to a scrape (zeros when
// tracing is off, so a dashboard's series exist either way).
func (t *Tracing) AddMetrics(p *metric.Page) {
	s := t.Stats()
	p.Add(spansDropped, float64(s.Dropped))
	p.Add(spansExported, float64(s.Exported))
	p.Add(spansFailed, float64(s.Failed))
	p.Add(spansQueued, float64(s.Queued))
	p.Add(spansQueueSize, float64(s.Max))
}
