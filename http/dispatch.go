package http

import (
	"context"
	"net"

	"github.com/valyala/fasthttp"
)

// parentKey is the RequestCtx user value that carries the context of a
// request Dispatch runs: there is no client socket to watch, the caller's
// context says when to stop.
type parentKey struct{}

// Dispatch runs one request through the server's routes in-process, as if
// a client had sent it, and returns the answer's status and body. Batches
// use it: their requests take the same path as everyone else's (the same
// checks, the same scheduler) without a socket. It skips the API key —
// whoever submitted the batch was already let in — and honours the drain:
// a server shutting down answers 503. class, when set, is sent as the
// X-Superfluid-Class header.
func (s *Server) Dispatch(ctx context.Context, method, path string, body []byte, class string) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.SetContentType("application/json")
	if class != "" {
		req.Header.Set("X-Superfluid-Class", class)
	}
	req.SetBody(body)
	var rc fasthttp.RequestCtx
	rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, fasthttpLogger{})
	rc.SetUserValue(parentKey{}, ctx)
	s.route(&rc)
	// A streamed answer is read to its end here (Body drains the stream).
	out := append([]byte(nil), rc.Response.Body()...)
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	return rc.Response.StatusCode(), out, nil
}

// dispatchParent is the caller's context of a dispatched request; nil for
// one that came over a socket.
func dispatchParent(ctx *fasthttp.RequestCtx) context.Context {
	if c, ok := ctx.UserValue(parentKey{}).(context.Context); ok {
		return c
	}
	return nil
}
