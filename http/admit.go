package http

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/keys"
)

// Everything a request's headers alone decide — the Host and Origin
// rules, a CORS preflight, the route, the API key and the route's body
// limit — is decided once the headers arrive, before a byte of the body
// is read: a request that will be refused costs its headers, never the
// body it announces. admit is that decision; fasthttp asks for it twice,
// in HeaderReceived (how much body to prefetch, how long to wait for it)
// and in the handler (the answer), and both ask the same function.

// admission is what the headers decide about a request.
type admission struct {
	kind   wire.API
	route  route
	id     string      // the path's {id} segment
	limit  int         // most body bytes the route takes
	refuse *wire.Error // answer this, without reading the body
	// preflight: a CORS preflight from an allowed origin, answered 204.
	preflight bool
	// origin: an allowed Origin header, echoed in the CORS headers of the
	// answer; "" when the request had none.
	origin string
	// client is the keys file's key the request presented (nil for none,
	// --api-key's, or a public route), whose policy run enforces.
	client *keys.Client
}

// admit decides a request that came over a socket from its headers and
// its normalized path.
func (s *Server) admit(h *fasthttp.RequestHeader, path string) admission {
	a := admission{kind: kindOfPath(path)}
	g := s.guard.Load()
	if g == nil { // not serving yet: Serve sets the policies before accepting
		g = &transportGuard{origins: s.origins}
	}
	if g.hosts != nil && !g.hosts.allows(string(h.Host())) {
		a.refuse = forbidden("this server answers only requests addressed to localhost or a loopback address (Host %q)", truncateForMessage(h.Host()))
		return a
	}
	if origin := h.Peek("Origin"); len(origin) > 0 {
		if !g.origins.allows(string(origin)) && !sameOrigin(string(origin), string(h.Host()), g.hosts != nil) {
			a.refuse = forbidden("origin %q may not use this server; --allowed-origins (SUPERFLUID_ORIGINS) adds it", truncateForMessage(origin))
			return a
		}
		a.origin = string(origin)
		if h.IsOptions() && len(h.Peek("Access-Control-Request-Method")) > 0 {
			a.preflight = true
			return a
		}
	}
	r, id, err := s.resolve(path, string(h.Method()), h.IsHead())
	a.kind = r.kind
	if err != nil {
		a.refuse = err
		return a
	}
	a.route, a.id = r, id
	if !r.public {
		client, ok := s.identify(h)
		if !ok {
			a.refuse = &wire.Error{Status: fasthttp.StatusUnauthorized, Type: "authentication_error", Msg: "invalid or missing API key"}
			return a
		}
		a.client = client
	}
	a.limit = s.bodyLimit(r)
	if n := announcedLength(h); n > a.limit {
		a.refuse = tooLarge(a.limit)
	}
	return a
}

// headerReceived is fasthttp's HeaderReceived. A request to refuse has
// its body skipped: its Content-Length becomes 0, so fasthttp reads none
// of it, and the length it announced is noted (unreadLengthHeader) for
// admit to answer 413 by; the handler answers at once and closes the
// connection with the body unread. A request to serve gets its route's
// limit (what fasthttp prefetches, at most 8 KiB) and the body timeout.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	h.Del(unreadLengthHeader) // only ever the server's own note
	refused := fasthttp.RequestConfig{MaxRequestBodySize: 1, ReadTimeout: s.cfg.HeaderTimeout}
	u := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(u)
	if err := u.Parse(nil, h.RequestURI()); err != nil {
		return refused // fasthttp answers it: its own parse fails the same way
	}
	a := s.admit(h, string(u.Path()))
	if a.refuse == nil && !a.preflight {
		return fasthttp.RequestConfig{MaxRequestBodySize: a.limit, ReadTimeout: bodyReadTimeout}
	}
	if n := h.ContentLength(); n != 0 {
		h.Set(unreadLengthHeader, strconv.Itoa(n))
		h.SetContentLength(0)
	}
	return refused
}

// unreadLengthHeader carries the Content-Length of a request refused on
// its headers, whose body the server skipped (headerReceived).
const unreadLengthHeader = "X-Superfluid-Unread-Length"

// announcedLength is the body length a request's headers announced: -1
// for chunked, -2 for none.
func announcedLength(h *fasthttp.RequestHeader) int {
	if v := h.Peek(unreadLengthHeader); v != nil {
		if n, err := strconv.Atoi(string(v)); err == nil {
			return n
		}
	}
	return h.ContentLength()
}

// bodyReadTimeout bounds reading a body once its headers are in: a 16 MiB
// upload at 56 kB/s.
const bodyReadTimeout = 5 * time.Minute

// answerPreflight answers an allowed origin's CORS preflight: any method,
// and the headers it asked for (the SDKs' own x-stainless-*, anthropic-*,
// the key headers): the origin is trusted, so no header list to keep.
func answerPreflight(ctx *fasthttp.RequestCtx, origin string) {
	h := &ctx.Response.Header
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS")
	if req := ctx.Request.Header.Peek("Access-Control-Request-Headers"); len(req) > 0 {
		h.SetBytesV("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", "600")
	h.Set("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
}

// allowOrigin marks an answer readable by the allowed origin's page. It
// runs after the handler (writeError resets the headers), before fasthttp
// writes them, streams included.
func allowOrigin(ctx *fasthttp.RequestCtx, origin string) {
	ctx.Response.Header.Set("Access-Control-Allow-Origin", origin)
	ctx.Response.Header.Add("Vary", "Origin")
}

func forbidden(format string, args ...any) *wire.Error {
	return &wire.Error{Status: fasthttp.StatusForbidden, Type: "permission_error", Msg: fmt.Sprintf(format, args...)}
}

func tooLarge(limit int) *wire.Error {
	return &wire.Error{Status: fasthttp.StatusRequestEntityTooLarge, Type: "invalid_request_error", Msg: fmt.Sprintf("the request body is over this route's limit of %d bytes", limit)}
}

// timedOut is the answer to a request whose what (the request, its body)
// did not arrive within its timeout.
func timedOut(what string) *wire.Error {
	return &wire.Error{Status: fasthttp.StatusRequestTimeout, Type: "invalid_request_error", Msg: what + " did not arrive in time"}
}

// truncateForMessage keeps an error message short whatever a header held.
func truncateForMessage(b []byte) string {
	const most = 100
	if len(b) > most {
		return string(b[:most]) + "…"
	}
	return string(b)
}

// transportGuard is the Origin and Host rules of a listening server.
type transportGuard struct {
	origins *originPolicy
	hosts   *hostPolicy // nil: bound beyond loopback, reached under other names
}

// guardFor is the guard of a server listening at addr: its own origin
// joins the allowed ones, and the Host rule holds while it listens on a
// loopback address only.
func (s *Server) guardFor(addr net.Addr) *transportGuard {
	g := &transportGuard{origins: s.origins}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok { // an in-memory or unix listener: no browser reaches it
		return g
	}
	ap := tcp.AddrPort()
	if own := ownOrigins(ap); own != nil {
		// The user's patterns parsed in NewServer; the own ones are exact.
		if origins, err := newOriginPolicy(own, s.cfg.AllowedOrigins); err == nil {
			g.origins = origins
		}
	}
	if ap.Addr().Unmap().IsLoopback() {
		g.hosts = newHostPolicy(s.hostname)
	}
	return g
}
