package http

import (
	"bufio"
	"encoding/json"

	"github.com/valyala/fasthttp"
)

// eventWriter writes a streamed response (SSE or NDJSON) and reports a
// client that went away as an error, which cancels the generation.
type eventWriter struct {
	w   *bufio.Writer
	sse bool
	err error
}

// streamResponse starts a streamed response; produce runs in fasthttp's
// writer goroutine after the handler returns, so it must not touch the
// RequestCtx. Everything it needs is captured before.
func streamResponse(ctx *fasthttp.RequestCtx, sse bool, produce func(ew *eventWriter)) {
	if sse {
		ctx.SetContentType("text/event-stream")
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.Response.Header.Set("X-Accel-Buffering", "no")
	} else {
		ctx.SetContentType("application/x-ndjson")
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	// The handler's own count is still held here, so this Add cannot race
	// a Shutdown that saw zero.
	gate, _ := ctx.UserValue(inflightKey{}).(*requestGate)
	if gate != nil {
		gate.hold()
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if gate != nil {
			defer gate.leave()
		}
		produce(&eventWriter{w: w, sse: sse})
	})
}

// send writes one event (for SSE, with an optional event name) and flushes.
func (ew *eventWriter) send(event string, v any) error {
	if ew.err != nil {
		return ew.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		ew.err = err
		return err
	}
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

// raw writes text as is (e.g. "data: [DONE]\n\n") and flushes.
func (ew *eventWriter) raw(s string) error {
	if ew.err != nil {
		return ew.err
	}
	ew.w.WriteString(s)
	return ew.flush()
}

func (ew *eventWriter) flush() error {
	if err := ew.w.Flush(); err != nil {
		ew.err = err
	}
	return ew.err
}
