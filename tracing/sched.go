package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"superfluid/sched"
)

// Span names of a generation's life in the scheduler.
const (
	spanGenerate = "superfluid.generate"
	spanQueue    = "queue"
	spanAdmit    = "admission"
	spanRestore  = "cache.restore"
	spanPrefill  = "prefill"
	spanStep     = "prefill.step"
	spanDecode   = "decode"
	spanPublish  = "cache.publish"
	spanPark     = "park"
)

// Scheduler is the observer for model's scheduler (sched.Config.Observer);
// nil when tracing is off.
func (t *Tracing) Scheduler(model string) sched.Observer {
	if t == nil {
		return nil
	}
	return &schedObserver{tracer: t.tracer, model: model}
}

type schedObserver struct {
	tracer trace.Tracer
	model  string
}

// Start opens the generation's span, under the request's when ctx holds
// one, and its queue wait.
func (o *schedObserver) Start(ctx context.Context, r sched.ObservedRequest) sched.JobObserver {
	common := []attribute.KeyValue{keyModel.String(o.model), keyClass.String(r.Class.String())}
	if api := apiOf(ctx); api != "" {
		common = append(common, keyAPI.String(api))
	}
	attrs := append(append([]attribute.KeyValue(nil), common...),
		attribute.Int("superfluid.prompt_tokens", r.PromptTokens), attribute.Int("superfluid.max_tokens", r.MaxTokens),
		attribute.Int64("superfluid.request_id", int64(r.ID)))
	ctx, span := o.tracer.Start(ctx, spanGenerate, trace.WithTimestamp(r.Submitted), trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		return nil // not sampled (OTEL_TRACES_SAMPLER): the scheduler tells nothing more
	}
	j := &jobSpans{tracer: o.tracer, ctx: ctx, span: span, common: common}
	j.queue = j.start(spanQueue, r.Submitted)
	return j
}

// jobSpans are one generation's spans. The scheduler's goroutine calls
// every method (Start excepted), in order, so it needs no lock.
type jobSpans struct {
	tracer trace.Tracer
	ctx    context.Context // the generation span's
	span   trace.Span
	common []attribute.KeyValue

	queue, restore, prefill, decode trace.Span
	prefillCtx                      context.Context
	prefilled                       int
}

// start opens a child of the generation's span at `at`.
func (j *jobSpans) start(name string, at time.Time, attrs ...attribute.KeyValue) trace.Span {
	_, s := j.tracer.Start(j.ctx, name, trace.WithTimestamp(at), trace.WithAttributes(j.common...), trace.WithAttributes(attrs...))
	return s
}

// end ends *s at `at` if it is open.
func end(s *trace.Span, at time.Time) {
	if *s != nil {
		(*s).End(trace.WithTimestamp(at))
		*s = nil
	}
}

func (j *jobSpans) Admitted(a sched.Admission) {
	end(&j.queue, a.Start)
	tier := a.Tier
	if tier == "" {
		tier = "none"
	}
	s := j.start(spanAdmit, a.Start, attribute.Int("superfluid.cache.matched_tokens", a.Cached),
		attribute.String("superfluid.cache.tier", tier), attribute.Bool("superfluid.cache.restoring", a.Restoring),
		attribute.Bool("superfluid.resumed", a.Resumed))
	s.End(trace.WithTimestamp(a.End))
	if a.Restoring {
		j.restore = j.start(spanRestore, a.End)
	}
	j.prefilled = 0
	j.prefillCtx, j.prefill = j.tracer.Start(j.ctx, spanPrefill, trace.WithTimestamp(a.End), trace.WithAttributes(j.common...))
}

func (j *jobSpans) Restored(at time.Time, tokens int) {
	if j.restore != nil {
		j.restore.SetAttributes(attribute.Int("superfluid.cache.restored_tokens", tokens))
		if tokens == 0 {
			j.restore.SetStatus(codes.Error, "restore failed: prefilling cold")
		}
	}
	end(&j.restore, at)
}

func (j *jobSpans) Prefilled(start, stop time.Time, tokens int) {
	if j.prefill == nil {
		return
	}
	j.prefilled += tokens
	_, s := j.tracer.Start(j.prefillCtx, spanStep, trace.WithTimestamp(start),
		trace.WithAttributes(j.common...), trace.WithAttributes(attribute.Int("superfluid.tokens", tokens)))
	s.End(trace.WithTimestamp(stop))
}

func (j *jobSpans) Decoding(at time.Time) {
	j.endPrefill(at)
	j.decode = j.start(spanDecode, at)
}

func (j *jobSpans) endPrefill(at time.Time) {
	if j.prefill != nil {
		j.prefill.SetAttributes(attribute.Int("superfluid.prefilled_tokens", j.prefilled))
	}
	end(&j.prefill, at)
}

func (j *jobSpans) Preempted(at time.Time) {
	j.span.AddEvent("preempted", trace.WithTimestamp(at))
	j.endPrefill(at)
	end(&j.decode, at)
	end(&j.restore, at)
	j.queue = j.start(spanQueue, at, attribute.Bool("superfluid.resumed", true))
}

func (j *jobSpans) Published(start, stop time.Time, tokens int, parked bool) {
	name := spanPublish
	if parked {
		name = spanPark
	}
	s := j.start(name, start, attribute.Int("superfluid.tokens", tokens), attribute.Bool("superfluid.cache.parked", parked))
	s.End(trace.WithTimestamp(stop))
}

func (j *jobSpans) Ended(at time.Time, r sched.Result) {
	j.endPrefill(at)
	end(&j.decode, at)
	end(&j.restore, at)
	end(&j.queue, at)
	j.span.SetAttributes(attribute.String("superfluid.finish", r.Finish.String()),
		attribute.Int("superfluid.generated_tokens", r.Generated), attribute.Int("superfluid.cached_tokens", r.CachedTokens),
		attribute.Int("superfluid.preemptions", r.Preemptions))
	if r.Err != nil {
		j.span.SetStatus(codes.Error, r.Err.Error())
	}
	j.span.End(trace.WithTimestamp(at))
}
