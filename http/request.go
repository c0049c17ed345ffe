package http

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
)

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
func (s *Server) requestContext(ctx *fasthttp.RequestCtx) (context.Context, func()) {
	c, cancel := context.WithCancel(context.Background())
	go watchClient(ctx.Conn(), cancel, c.Done(), s.cfg.ClientPoll)
	if api, ok := ctx.UserValue(routeAPIKey{}).(wire.API); ok {
		return sched.WithAPI(c, api.String()), cancel // the live status names a lane's API
	}
	return c, cancel
}

// routeAPIKey is the RequestCtx user value holding the API of the route
// a request took.
type routeAPIKey struct{}
