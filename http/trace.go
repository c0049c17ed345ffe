package http

import (
	"github.com/valyala/fasthttp"

	"superfluid/tracing"
)

// requestTraceKey holds a request's *tracing.Request (traced servers only).
type requestTraceKey struct{}

// startTrace starts the span of a request on route r, nil when tracing is
// off. The client's traceparent header, if any, is its parent.
func (s *Server) startTrace(ctx *fasthttp.RequestCtx, r route) *tracing.Request {
	if s.cfg.Tracing == nil {
		return nil
	}
	tr := s.cfg.Tracing.StartRequest(r.kind.String(), r.method, r.path, func(name string) string {
		return string(ctx.Request.Header.Peek(name))
	})
	ctx.SetUserValue(requestTraceKey{}, tr)
	return tr
}

// traceOf is the request's span, nil when it is not traced (whose methods
// do nothing).
func traceOf(ctx *fasthttp.RequestCtx) *tracing.Request {
	tr, _ := ctx.UserValue(requestTraceKey{}).(*tracing.Request)
	return tr
}
