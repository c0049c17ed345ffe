package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"
)

// EventWriter writes a streamed response (SSE or NDJSON) in one API's
// shape. Every goroutine of the request may send: events go out one at a
// time, each whole. A write that fails — the client went away, or stopped
// reading for the write timeout — is kept as the writer's error, and every
// later send returns it, which cancels the generation.
type EventWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	api API
	sse bool
	// conn is the client's socket; each event renews its write deadline,
	// so a client that stops reading fails the write stuck behind it after
	// timeout. nil without a timeout.
	conn    net.Conn
	timeout time.Duration
	err     error
}

// ErrStreamEnded is the writer's error once an error event has ended the
// stream: nothing may follow it.
var ErrStreamEnded = errors.New("http: the stream ended with an error event")

// Send writes one event (for SSE, with an optional event name) and flushes.
func (ew *EventWriter) Send(event string, v any) error {
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

// Raw writes text as is (e.g. "data: [DONE]\n\n") and flushes.
func (ew *EventWriter) Raw(s string) error {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.err != nil {
		return ew.err
	}
	ew.renewDeadline()
	ew.w.WriteString(s)
	return ew.flush()
}

// Fail ends the stream with err as an error event in the API's stream
// shape (an "error" event for Anthropic, a data line holding the API's
// error body for the others), unless the stream has already failed.
func (ew *EventWriter) Fail(err error) {
	e := AsError(err)
	b, _ := json.Marshal(ErrorBody(ew.api, e))
	event := ""
	if ew.api == Anthropic {
		event = "error"
	}
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.err != nil {
		return
	}
	if ew.write(event, b) == nil {
		ew.err = ErrStreamEnded
	}
}

// FailAll is the task.FanOut callback of a streamed response with several
// parts: the first part to fail — the engine failed, the server is
// shutting down, the client is gone — ends the stream with its error
// event (when the client is still there to read it), and every part is
// cancelled.
func (ew *EventWriter) FailAll(cancel func()) func(err error) {
	return func(err error) {
		ew.Fail(err)
		cancel()
	}
}

// write frames one event; ew.mu is held.
func (ew *EventWriter) write(event string, b []byte) error {
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
func (ew *EventWriter) renewDeadline() {
	if ew.conn != nil && ew.timeout > 0 {
		ew.conn.SetWriteDeadline(time.Now().Add(ew.timeout))
	}
}

func (ew *EventWriter) flush() error {
	if err := ew.w.Flush(); err != nil {
		ew.err = err
	}
	return ew.err
}

// NewEventWriter is a writer of api's events, SSE or NDJSON, that writes
// nothing until Attach gives it the response's writer.
func NewEventWriter(api API, sse bool) *EventWriter { return &EventWriter{api: api, sse: sse} }

// Attach gives the writer the response body's writer; the server calls it
// from fasthttp's body writer, before the handler's producer runs.
func (ew *EventWriter) Attach(w *bufio.Writer) { ew.w = w }

// WatchWrites renews conn's write deadline by timeout before each event
// (see renewDeadline); not called in-process, where there is no socket.
func (ew *EventWriter) WatchWrites(conn net.Conn, timeout time.Duration) {
	ew.conn, ew.timeout = conn, timeout
}
