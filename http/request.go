package http

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// ClientHeader names the client a request comes from, for the FIM gate's
// supersession (an editor's newer completion cancels its older one).
// Without it a client is its address and User-Agent: an editor
// opens a new connection per request, so the port says nothing, while
// two tools on one machine differ by agent.
const ClientHeader = "X-Superfluid-Client"

// clientName is the client a request comes from (ClientHeader).
func clientName(ctx *fasthttp.RequestCtx) string {
	if c := ctx.Request.Header.Peek(ClientHeader); len(c) > 0 {
		return "h:" + string(c)
	}
	return "a:" + ctx.RemoteIP().String() + "|" + string(ctx.UserAgent())
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
func (s *Server) requestContext(ctx *fasthttp.RequestCtx) (context.Context, func()) {
	c, cancel := context.WithCancel(task.WithClient(context.Background(), clientName(ctx)))
	go watchClient(ctx.Conn(), cancel, c.Done(), s.cfg.ClientPoll)
	return c, cancel
}
