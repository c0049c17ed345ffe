package http

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// ClientHeader names the client a request comes from, for the FIM gate's
// supersession (the client's newer completion cancels its older one).
// Only a client that names itself is one: address and User-Agent are
// shared by several editor windows, a team on one workstation, or a
// tool's parallel workers, whose completions must not cancel each other.
// An editor that does not name itself is still rid of its stale
// completions by hanging up (watchClient notices within 20 ms).
const ClientHeader = "X-Superfluid-Client"

// clientName is the client a request names itself (ClientHeader), "" for
// none.
func clientName(ctx *fasthttp.RequestCtx) string {
	return string(ctx.Request.Header.Peek(ClientHeader))
}

// requestClass is the class a chat or completion request runs in: the
// X-Superfluid-Class header, else the server's default.
func (s *Server) requestClass(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return wire.Class(ctx, field, s.cfg.DefaultClass)
}

// requestContext is the context a request's generation runs under: it ends
// when the client hangs up, or when the returned func is called (always
// call it: for a streamed response, when the stream ends). A watcher peeks
// at the socket every ClientPoll until then: fasthttp only notices a gone
// client at its next write, which for a whole response comes after all the
// work, and for a stream not before the first token — a long prompt's
// prefill would otherwise run on for nobody.
//
// Traced, the context carries the request's span (its generation's spans
// are children of it), and holds it open until the returned func is
// called: a stream's span ends with the stream, not with its handler.
func (s *Server) requestContext(ctx *fasthttp.RequestCtx) (context.Context, func()) {
	base, untrace := traceOf(ctx).Context(task.WithClient(context.Background(), clientName(ctx)))
	if arrived, ok := ctx.UserValue(arrivalKey{}).(func()); ok {
		base = task.Announced(base, arrived)
	}
	c, cancel := context.WithCancel(base)
	go watchClient(ctx.Conn(), cancel, c.Done(), s.cfg.ClientPoll)
	done := func() {
		cancel()
		untrace()
	}
	if api, ok := ctx.UserValue(routeAPIKey{}).(wire.API); ok {
		return sched.WithAPI(c, api.String()), done // the live status names a lane's API
	}
	return c, done
}

// announce tells m's scheduler that a request on route r is on its way
// (an idle runner gathers a burst of work taken whole while requests
// are); arrived settles it. task.SubmitAll settles it once the request's
// work is queued — the request's context carries it there (Announced) —
// and the caller when the request ends without submitting. A route that
// does not generate announces nothing.
func announce(m *Model, r route) (arrived func()) {
	if m == nil || !r.generates || m.Sched == nil {
		return func() {}
	}
	return m.Sched.Expect()
}

// arrivalKey is the RequestCtx user value holding the arrived function of
// the request's announcement to its model's scheduler (Server.run).
type arrivalKey struct{}

// routeAPIKey is the RequestCtx user value holding the API of the route
// a request took.
type routeAPIKey struct{}
