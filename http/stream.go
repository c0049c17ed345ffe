package http

import (
	"bufio"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

// streamKey is the RequestCtx user value under which route leaves its
// server for streamResponse, which needs the drain gate and the write
// timeout.
type streamKey struct{}

// streamResponse starts a streamed response; produce runs in fasthttp's
// writer goroutine after the handler returns, so it must not touch the
// RequestCtx. Everything it needs is captured before. A panic in produce
// ends this stream with an error event, not the process; produce's own
// deferred calls (cancelling its request) run first.
func streamResponse(ctx *fasthttp.RequestCtx, sse bool, produce func(ew *wire.EventWriter)) {
	if sse {
		ctx.SetContentType("text/event-stream")
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.Response.Header.Set("X-Accel-Buffering", "no")
	} else {
		ctx.SetContentType("application/x-ndjson")
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ew := wire.NewEventWriter(kindOfPath(string(ctx.Path())), sse)
	// The handler's own count is still held here, so this hold cannot race
	// a Shutdown that saw zero.
	s, _ := ctx.UserValue(streamKey{}).(*Server)
	releaseModel := holdModel(ctx)
	if s != nil {
		s.gate.hold()
		ew.WatchWrites(ctx.Conn(), s.cfg.WriteTimeout)
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if s != nil {
			defer s.gate.leave()
		}
		defer releaseModel()
		defer func() {
			if v := recover(); v != nil {
				ew.Fail(task.Recovered("stream writer", v))
			}
		}()
		ew.Attach(w)
		produce(ew)
	})
}

// progressBody wraps a body fasthttp streams from a reader (a file's
// content) so that each read renews the write deadline: the read comes
// once the last write has gone out, so the write timeout bounds a stalled
// download, never a long one (fasthttp's own deadline, set once as the
// response starts, would cut a download that takes longer).
func (s *Server) progressBody(ctx *fasthttp.RequestCtx, body io.ReadCloser) io.ReadCloser {
	return &progressReader{ReadCloser: body, conn: ctx.Conn(), timeout: s.cfg.WriteTimeout}
}

type progressReader struct {
	io.ReadCloser
	conn    net.Conn
	timeout time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	p.conn.SetWriteDeadline(time.Now().Add(p.timeout))
	return p.ReadCloser.Read(b)
}
