package http

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// eventWriter writes a streamed response (SSE or NDJSON) in one API's
// shape. Every goroutine of the request may send: events go out one at a
// time, each whole. A write that fails — the client went away, or stopped
// reading for the write timeout — is kept as the writer's error, and every
// later send returns it, which cancels the generation.
type eventWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	kind apiKind
	sse  bool
	// conn is the client's socket; each event renews its write deadline,
	// so a client that stops reading fails the write stuck behind it after
	// timeout. nil in-process (Dispatch) or without a timeout.
	conn    net.Conn
	timeout time.Duration
	err     error
}

// errStreamEnded is the writer's error once an error event has ended the
// stream: nothing may follow it.
var errStreamEnded = errors.New("http: the stream ended with an error event")

// streamKey is the RequestCtx user value under which route leaves its
// server for streamResponse, which needs the drain gate and the write
// timeout.
type streamKey struct{}

// streamResponse starts a streamed response; produce runs in fasthttp's
// writer goroutine after the handler returns, so it must not touch the
// RequestCtx. Everything it needs is captured before. A panic in produce
// ends this stream with an error event, not the process; produce's own
// deferred calls (cancelling its request) run first.
func streamResponse(ctx *fasthttp.RequestCtx, sse bool, produce func(ew *eventWriter)) {
	if sse {
		ctx.SetContentType("text/event-stream")
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.Response.Header.Set("X-Accel-Buffering", "no")
	} else {
		ctx.SetContentType("application/x-ndjson")
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ew := &eventWriter{kind: kindOfPath(string(ctx.Path())), sse: sse}
	// The handler's own count is still held here, so this hold cannot race
	// a Shutdown that saw zero.
	s, _ := ctx.UserValue(streamKey{}).(*Server)
	releaseModel := holdModel(ctx)
	if s != nil {
		s.gate.hold()
		if dispatchParent(ctx) == nil {
			ew.conn, ew.timeout = ctx.Conn(), s.cfg.WriteTimeout
		}
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if s != nil {
			defer s.gate.leave()
		}
		defer releaseModel()
		defer func() {
			if v := recover(); v != nil {
				ew.fail(recovered("stream writer", v))
			}
		}()
		ew.w = w
		produce(ew)
	})
}

// send writes one event (for SSE, with an optional event name) and flushes.
func (ew *eventWriter) send(event string, v any) error {
	b, err := json.Marshal(v)
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.err != nil {
		return ew.err
	}
	if err != nil {
		ew.err = err
		return err
	}
	return ew.write(event, b)
}

// raw writes text as is (e.g. "data: [DONE]\n\n") and flushes.
func (ew *eventWriter) raw(s string) error {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.err != nil {
		return ew.err
	}
	ew.renewDeadline()
	ew.w.WriteString(s)
	return ew.flush()
}

// fail ends the stream with err as an error event in the API's stream
// shape (an "error" event for Anthropic, a data line holding the API's
// error body for the others), unless the stream has already failed.
func (ew *eventWriter) fail(err error) {
	e := asAPIError(err)
	b, _ := json.Marshal(errorBody(ew.kind, e))
	event := ""
	if ew.kind == apiAnthropic {
		event = "error"
	}
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.err != nil {
		return
	}
	if ew.write(event, b) == nil {
		ew.err = errStreamEnded
	}
}

// failAll is the fanOut callback of a streamed response with several
// parts: the first part to fail — the engine failed, the server is
// shutting down, the client is gone — ends the stream with its error
// event (when the client is still there to read it), and every part is
// cancelled.
func (ew *eventWriter) failAll(cancel func()) func(err error) {
	return func(err error) {
		ew.fail(err)
		cancel()
	}
}

// write frames one event; ew.mu is held.
func (ew *eventWriter) write(event string, b []byte) error {
	ew.renewDeadline()
	if ew.sse {
		if event != "" {
			ew.w.WriteString("event: ")
			ew.w.WriteString(event)
			ew.w.WriteByte('\n')
		}
		ew.w.WriteString("data: ")
		ew.w.Write(b)
		ew.w.WriteString("\n\n")
	} else {
		ew.w.Write(b)
		ew.w.WriteByte('\n')
	}
	return ew.flush()
}

// renewDeadline gives the writes of the coming event the write timeout.
// The event travels through fasthttp's pipe to its connection goroutine,
// which writes it to the socket: a client that stops reading blocks that
// write until the deadline fails it, fasthttp then closes the pipe, and
// this writer's next write fails — or its current one, once the pipe's
// few buffers are full. Renewing before each event (not once per
// response) lets a stream idle between tokens as long as it needs;
// fasthttp's own WriteTimeout renews it again for the next response on
// the connection.
func (ew *eventWriter) renewDeadline() {
	if ew.conn != nil && ew.timeout > 0 {
		ew.conn.SetWriteDeadline(time.Now().Add(ew.timeout))
	}
}

// progressBody wraps a body fasthttp streams from a reader (a file's
// content) so that each read renews the write deadline: the read comes
// once the last write has gone out, so the write timeout bounds a stalled
// download, never a long one (fasthttp's own deadline, set once as the
// response starts, would cut a download that takes longer).
func (s *Server) progressBody(ctx *fasthttp.RequestCtx, body io.ReadCloser) io.ReadCloser {
	if dispatchParent(ctx) != nil {
		return body // in-process: no socket
	}
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

func (ew *eventWriter) flush() error {
	if err := ew.w.Flush(); err != nil {
		ew.err = err
	}
	return ew.err
}
