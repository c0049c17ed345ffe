package tracing

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"superfluid/metric"
	"superfluid/sched"
	"superfluid/tracing/tracingtest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReadConfigIsOffUnlessConfigured(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		enabled bool
		queue   int
		err     string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, enabled: true, queue: 2048},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h/v1/traces", "OTEL_BSP_MAX_QUEUE_SIZE": "16"}, enabled: true, queue: 16},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true, queue: 2048},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin"`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: `protocol "grpc"`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "-1"}, err: "OTEL_BSP_MAX_QUEUE_SIZE"},
	} {
		got, err := ReadConfig(envOf(c.env))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want one naming %s", c.env, err, c.err)
			}
			continue
		}
		if err != nil || got.Enabled != c.enabled || got.MaxQueue != c.queue {
			t.Errorf("%v: %+v %v, want enabled %v queue %d", c.env, got, err, c.enabled, c.queue)
		}
	}
}

// Off, nothing is built: no tracer, no processor, no goroutine; every
// method of the nil Tracing is a no-op the callers need not guard.
func TestOffStartsNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	tr, err := FromEnv(context.Background(), envOf(nil), "test")
	if err != nil || tr != nil {
		t.Fatalf("FromEnv with nothing configured: %v %v", tr, err)
	}
	if tr.Scheduler("m") != nil {
		t.Fatal("an observer while off")
	}
	r := tr.StartRequest("openai", "POST", "/v1/completions", nil)
	if r != nil {
		t.Fatal("a request span while off")
	}
	ctx, release := r.Context(context.Background())
	release()
	r.SetModel("m")
	r.SetStatus(200)
	r.Done()
	if ctx != context.Background() {
		t.Fatal("the context changed while off")
	}
	p := metric.NewPage()
	tr.AddMetrics(p)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines after, %d before", after, before)
	}
}

// One request's spans reach a collector over OTLP/HTTP: the HTTP span
// (parent from the client's traceparent), the generation under it and its
// life's spans under that, each with model, class and API.
func TestSpansOfOneRequestReachTheCollector(t *testing.T) {
	col := tracingtest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_SERVICE_NAME", "sf-test")
	tr, err := FromEnv(context.Background(), os.Getenv, "v0")
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v %v", tr, err)
	}
	defer tr.Shutdown(context.Background())

	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r := tr.StartRequest("anthropic", "POST", "/v1/messages", func(k string) string {
		if strings.EqualFold(k, "traceparent") {
			return parent
		}
		return ""
	})
	r.SetModel("tiny")
	ctx, release := r.Context(context.Background())
	r.Done() // the handler returned; the stream it left holds the span
	obs := tr.Scheduler("tiny")
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	j := obs.Start(ctx, sched.ObservedRequest{ID: 7, Class: sched.Agent, PromptTokens: 120, MaxTokens: 8, Submitted: at(0)})
	j.Admitted(sched.Admission{Start: at(5), End: at(6), Cached: 64, Tier: "parked", Restoring: true})
	j.Restored(at(20), 64)
	j.Prefilled(at(20), at(30), 40)
	j.Prefilled(at(30), at(40), 16)
	j.Decoding(at(40))
	j.Published(at(60), at(61), 127, true)
	j.Ended(at(61), sched.Result{Finish: sched.FinishLength, Generated: 8, CachedTokens: 64})
	r.SetStatus(200)
	release()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, ok := col.WaitFor(10*time.Second, func(s []tracingtest.Span) bool { return len(s) >= 10 })
	if !ok {
		t.Fatalf("collector got %d spans: %+v (refused %v)", len(spans), spans, col.Refused())
	}
	byName := map[string][]tracingtest.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	one := func(name string) tracingtest.Span {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans %q; all: %v", len(byName[name]), name, byName)
		}
		return byName[name][0]
	}
	httpSpan, gen := one("POST /v1/messages"), one(spanGenerate)
	if httpSpan.TraceID != "0af7651916cd43dd8448eb211c80319c" || httpSpan.ParentID != "b7ad6b7169203331" {
		t.Errorf("the HTTP span is not under the client's traceparent: %+v", httpSpan)
	}
	if httpSpan.Attrs["http.route"] != "/v1/messages" || httpSpan.Attrs["superfluid.model"] != "tiny" || httpSpan.Attrs["http.response.status_code"] != "200" {
		t.Errorf("HTTP span attributes %v", httpSpan.Attrs)
	}
	if httpSpan.Resource["service.name"] != "sf-test" {
		t.Errorf("resource %v", httpSpan.Resource)
	}
	if gen.ParentID != httpSpan.ID || gen.Attrs["superfluid.generated_tokens"] != "8" || gen.Attrs["superfluid.finish"] != "length" {
		t.Errorf("generation span %+v", gen)
	}
	for _, name := range []string{spanQueue, spanAdmit, spanRestore, spanPrefill, spanDecode, spanPark} {
		s := one(name)
		if s.ParentID != gen.ID {
			t.Errorf("%s is not under the generation span", name)
		}
		if s.Attrs["superfluid.model"] != "tiny" || s.Attrs["superfluid.class"] != "agent" || s.Attrs["superfluid.api"] != "anthropic" {
			t.Errorf("%s attributes %v", name, s.Attrs)
		}
		if s.End.Before(s.Start) {
			t.Errorf("%s ends before it starts", name)
		}
	}
	if a := one(spanAdmit).Attrs; a["superfluid.cache.matched_tokens"] != "64" || a["superfluid.cache.tier"] != "parked" {
		t.Errorf("admission %v", a)
	}
	if q := one(spanQueue); !q.Start.Equal(at(0)) || !q.End.Equal(at(5)) {
		t.Errorf("queue wait %v..%v, want the 5 ms before admission", q.Start, q.End)
	}
	steps := byName[spanStep]
	if len(steps) != 2 || steps[0].ParentID != one(spanPrefill).ID || one(spanPrefill).Attrs["superfluid.prefilled_tokens"] != "56" {
		t.Errorf("prefill steps %+v under %+v", steps, one(spanPrefill))
	}
	if st := tr.Stats(); st.Dropped != 0 || st.Exported != uint64(len(spans)) || st.Queued != 0 {
		t.Errorf("queue stats %+v for %d spans", st, len(spans))
	}
	if bad := col.Refused(); len(bad) > 0 {
		t.Errorf("collector refused %v", bad)
	}
}

// stalledExporter holds every export until released.
type stalledExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *stalledExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}
func (e *stalledExporter) Shutdown(context.Context) error { return nil }

// A stalled collector fills the bounded queue; the spans after that are
// dropped at once, counted, and the ones let in are exported when it
// recovers. Nothing that ends a span waits.
func TestFullQueueDropsAndCounts(t *testing.T) {
	exp := &stalledExporter{release: make(chan struct{})}
	tr := newTracing(exp, nil, 3)
	for range 10 {
		_, s := tr.tracer.Start(context.Background(), "s")
		s.End()
	}
	if st := tr.Stats(); st.Dropped != 7 || st.Queued != 3 {
		t.Fatalf("stats %+v, want 7 dropped and 3 queued", st)
	}
	close(exp.release)
	if err := tr.Shutdown(context.Background()); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	st := tr.Stats()
	if exp.got != 3 || st.Exported != 3 || st.Queued != 0 || st.Dropped != 7 {
		t.Fatalf("after recovery: exported %d, stats %+v", exp.got, st)
	}
	p := metric.NewPage()
	tr.AddMetrics(p)
	var b strings.Builder
	p.WriteTo(&b)
	if !strings.Contains(b.String(), "superfluid_trace_spans_dropped_total 7\n") {
		t.Fatalf("drops not on the page:\n%s", b.String())
	}
}

// A trace the sampler drops costs the scheduler nothing past Start: no
// job observer comes back, and nothing reaches the collector.
func TestUnsampledRequestsAreNotObserved(t *testing.T) {
	col := tracingtest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tr, err := FromEnv(context.Background(), os.Getenv, "v0")
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v %v", tr, err)
	}
	r := tr.StartRequest("openai", "POST", "/v1/completions", nil)
	ctx, release := r.Context(context.Background())
	if j := tr.Scheduler("m").Start(ctx, sched.ObservedRequest{Submitted: time.Now()}); j != nil {
		t.Fatalf("a job observer for an unsampled trace: %T", j)
	}
	release()
	r.Done()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(col.Spans()); n != 0 || tr.Stats().Exported != 0 {
		t.Fatalf("%d spans exported from an unsampled trace", n)
	}
}
