package http

import (
	"bytes"
	"errors"
	"io"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

// Body limits, per route. fasthttp would allocate a body's announced
// Content-Length before reading a byte of it, so the server streams
// request bodies (StreamRequestBody) and reads them itself, after the
// headers were admitted, into a buffer that grows with what arrives: a
// client pays in bytes sent for the memory it holds.
const (
	// conversationBodyLimit bounds a route that takes a prompt or a
	// conversation. A long agent conversation is a few MB of JSON — 200k
	// tokens of text with tool schemas, about 1–2 MB, and more when a
	// client escapes every non-ASCII character as \uXXXX (six bytes each);
	// a million-token context is about 4 MB of text. 8 MiB leaves room
	// for all of them.
	conversationBodyLimit = 8 << 20
	// controlBodyLimit bounds every other route: a model name, a file id,
	// a pull reference, or no body at all.
	controlBodyLimit = 64 << 10
)

// bodyLimit is the most body bytes route r takes: the upload route's is
// Config.MaxBody (--max-body), which also caps the others.
func (s *Server) bodyLimit(r route) int {
	switch r.body {
	case bodyUpload:
		return s.cfg.MaxBody
	case bodyConversation:
		return min(conversationBodyLimit, s.cfg.MaxBody)
	}
	return min(controlBodyLimit, s.cfg.MaxBody)
}

// bodyKind says what a route's body holds, and so how large it may be.
type bodyKind uint8

const (
	bodyControl bodyKind = iota
	bodyConversation
	bodyUpload
)

// readBody reads the streamed body of an admitted request, at most limit
// bytes (a chunked body announces no length), and makes it the request's
// body for the handlers (ctx.PostBody). An in-process request (Dispatch)
// has its body already.
func readBody(ctx *fasthttp.RequestCtx, limit int) error {
	stream := ctx.RequestBodyStream()
	if stream == nil {
		return nil
	}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(stream, int64(limit)+1))
	switch {
	case n > int64(limit):
		return tooLarge(limit)
	case err != nil:
		return readError(err)
	}
	if cl := ctx.Request.Header.ContentLength(); cl >= 0 && n < int64(cl) {
		return wire.BadRequest("the request body ended after %d of the %d bytes its Content-Length announced", n, cl)
	}
	ctx.Request.SetBodyRaw(buf.Bytes())
	return nil
}

// readError words a failed body read: the client went silent past the
// body timeout, or sent a malformed chunk.
func readError(err error) *wire.Error {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return timedOut("the request body")
	}
	return wire.BadRequest("reading the request body: %v", err)
}
