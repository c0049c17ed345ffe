package tracing

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys on every span of a request.
const (
	keyAPI   = attribute.Key("superfluid.api")
	keyModel = attribute.Key("superfluid.model")
	keyClass = attribute.Key("superfluid.class")
)

// apiKey carries the request's API in its context, for the scheduler's
// spans under it.
type apiKey struct{}

// Request is one HTTP request's span. It ends when the last of its holders
// lets go: the handler, and each piece of work that outlives it (a
// streamed response runs on after its handler returns). The zero and nil
// Request are tracing off.
type Request struct {
	span   trace.Span
	ctx    context.Context
	holds  atomic.Int32
	status atomic.Int32
	once   sync.Once
}

// StartRequest starts the span of a request on route (its pattern, as
// "/v1/chat/completions") of api, with the parent the client sent in its
// traceparent header (header reads one). It returns nil when tracing is off.
func (t *Tracing) StartRequest(api, method, route string, header func(string) string) *Request {
	if t == nil {
		return nil
	}
	parent := t.prop.Extract(context.Background(), headerCarrier(header))
	ctx := context.WithValue(parent, apiKey{}, api)
	ctx, span := t.tracer.Start(ctx, method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route), keyAPI.String(api)))
	r := &Request{span: span, ctx: ctx}
	r.holds.Store(1)
	return r
}

// SetModel names the model the request was routed to.
func (r *Request) SetModel(model string) {
	if r != nil && model != "" {
		r.span.SetAttributes(keyModel.String(model))
	}
}

// SetStatus records the response's status code (the last one set wins).
func (r *Request) SetStatus(code int) {
	if r != nil {
		r.status.Store(int32(code))
	}
}

// Context puts the request's span (and API) into ctx's place: the work a
// request starts runs under the returned context, and the scheduler's
// spans are its children. It holds the span open until release is called.
func (r *Request) Context(ctx context.Context) (context.Context, func()) {
	if r == nil {
		return ctx, func() {}
	}
	r.holds.Add(1)
	ctx = trace.ContextWithSpan(ctx, r.span)
	ctx = context.WithValue(ctx, apiKey{}, r.ctx.Value(apiKey{}))
	var once sync.Once
	return ctx, func() { once.Do(r.release) }
}

// Done is the handler's release; the span ends when the work it left
// (Context's holders) has ended too.
func (r *Request) Done() {
	if r != nil {
		r.release()
	}
}

func (r *Request) release() {
	if r.holds.Add(-1) > 0 {
		return
	}
	r.once.Do(func() {
		if code := r.status.Load(); code != 0 {
			r.span.SetAttributes(attribute.Int("http.response.status_code", int(code)))
			if code >= 500 {
				r.span.SetStatus(codes.Error, "")
			}
		}
		r.span.End()
	})
}

// apiOf is the API a request's context carries ("" when none).
func apiOf(ctx context.Context) string {
	s, _ := ctx.Value(apiKey{}).(string)
	return s
}

// headerCarrier reads a request's headers for the propagator.
type headerCarrier func(string) string

var _ propagation.TextMapCarrier = headerCarrier(nil)

func (h headerCarrier) Get(key string) string {
	if h == nil {
		return ""
	}
	return h(key)
}
func (h headerCarrier) Set(string, string) {}
func (h headerCarrier) Keys() []string     { return nil }
