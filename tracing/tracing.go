// Package tracing exports OpenTelemetry traces of the requests superfluid
// serves: the HTTP request (API, route), and under it the scheduler's view
// of the generation — queue wait, admission with the cache's match (tokens,
// tier), a restore from disk, each prefill step, decode, preemptions, and
// the publish (or park) of the sequence — with model, class and API on
// every span.
//
// Traces are off unless the environment configures them, by the standard
// variables: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true turn them off. Off,
// FromEnv returns nil: no exporter, no processor, no goroutine, and the
// nil *Tracing's methods observe nothing. On, spans go over OTLP/HTTP
// (protobuf; the exporter reads the other OTEL_EXPORTER_OTLP_* variables:
// headers, timeout, compression, certificates) through a batch processor
// whose queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE, default 2048): a span
// that finds it full is dropped and counted on /metrics, never waited for.
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the service
// (default "superfluid").
//
// The scheduler knows nothing of this package: it tells a sched.Observer,
// which Scheduler returns.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the tracer's name, as OpenTelemetry wants a library's.
const instrumentation = "superfluid"

// defaultQueue is OpenTelemetry's default batch queue size.
const defaultQueue = 2048

// Tracing is the process's tracer, its exporter and its bounded queue. A
// nil *Tracing is tracing off: every method is then a no-op.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	queue    *queueCount
	prop     propagation.TextMapPropagator
}

// Config is what FromEnv read, exposed for the tests and the log line.
type Config struct {
	Enabled  bool
	MaxQueue int
}

// ReadConfig decides from the environment (getenv) whether traces are on,
// and refuses, by name, what superfluid does not build in: an exporter
// other than otlp, a protocol other than http/protobuf.
func ReadConfig(getenv func(string) string) (Config, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Config{}, nil
	}
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	switch exporter {
	case "none":
		return Config{}, nil
	case "":
		if !endpoint {
			return Config{}, nil // off unless configured
		}
	case "otlp":
	default:
		return Config{}, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q is not built in (otlp or none)", exporter)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return Config{}, fmt.Errorf("tracing: OTLP protocol %q is not built in (http/protobuf)", proto)
	}
	c := Config{Enabled: true, MaxQueue: defaultQueue}
	if v := strings.TrimSpace(getenv("OTEL_BSP_MAX_QUEUE_SIZE")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Config{}, fmt.Errorf("tracing: OTEL_BSP_MAX_QUEUE_SIZE=%q is not a positive number", v)
		}
		c.MaxQueue = n
	}
	return c, nil
}

// FromEnv starts tracing as the environment configures it, or returns nil
// (tracing off) when it does not. version is the service's version.
func FromEnv(ctx context.Context, getenv func(string) string, version string) (*Tracing, error) {
	cfg, err := ReadConfig(getenv)
	if err != nil || !cfg.Enabled {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	// Ours first, so OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "superfluid"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	return newTracing(exp, res, cfg.MaxQueue), nil
}

// newTracing builds the provider over exp with a queue of maxQueue spans.
func newTracing(exp sdktrace.SpanExporter, res *resource.Resource, maxQueue int) *Tracing {
	q := &queueCount{max: int64(maxQueue)}
	bsp := sdktrace.NewBatchSpanProcessor(&countingExporter{next: exp, q: q}, sdktrace.WithMaxQueueSize(maxQueue))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(&boundedProcessor{SpanProcessor: bsp, q: q})}
	if res != nil {
		opts = append(opts, sdktrace.WithResource(res))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	// W3C trace context only: baggage would be parsed from every
	// request's headers for nothing that reads it.
	return &Tracing{provider: tp, tracer: tp.Tracer(instrumentation), queue: q, prop: propagation.TraceContext{}}
}

// Shutdown exports what is queued (within ctx) and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// ForceFlush exports what is queued now (a test's collector waits on it).
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}
