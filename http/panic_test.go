package http

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"

	"superfluid/http/wire"
	"superfluid/panics"
)

// A request of every shape — whole and streamed, one choice and several,
// each API — so that a generation is followed on each kind of goroutine
// the server runs for a request: the handler's, fasthttp's stream writer,
// the goroutines of n choices and of llama.cpp's prompts.
type requestShape struct {
	name  string
	path  string
	body  string
	kind  wire.API
	sse   bool // streamed as server-sent events (else NDJSON when stream)
	strm  bool
	where string // the goroutine that follows the generation, as recovered names it
	parts int    // generations submitted: n, or llama.cpp's prompts
	// done tells a finished stream's last event (or a whole answer) from a
	// cut one.
	done func(last string) bool
}

func requestShapes(maxTokens int) []requestShape {
	chat := func(n int, stream bool) string {
		return fmt.Sprintf(`{"model":"toy","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"temperature":0,"n":%d,"stream":%v}`, maxTokens, n, stream)
	}
	hasDone := func(last string) bool { return last == "[DONE]" }
	shapes := []requestShape{
		{name: "openai whole", path: "/v1/chat/completions", body: chat(1, false), kind: wire.OpenAI, where: "choice",
			done: func(b string) bool { return strings.Contains(b, `"finish_reason":"length"`) }},
		{name: "openai whole n=2", path: "/v1/chat/completions", body: chat(2, false), kind: wire.OpenAI, where: "choice",
			done: func(b string) bool { return strings.Count(b, `"finish_reason":"length"`) == 2 }},
		{name: "openai streamed n=2", path: "/v1/chat/completions", body: chat(2, true), kind: wire.OpenAI, sse: true, strm: true, where: "choice", done: hasDone},
		{name: "completions streamed n=2", path: "/v1/completions", kind: wire.OpenAI, sse: true, strm: true, where: "choice", done: hasDone,
			body: fmt.Sprintf(`{"model":"toy","prompt":"hi","max_tokens":%d,"temperature":0,"n":2,"stream":true}`, maxTokens)},
		{name: "anthropic streamed", path: "/v1/messages", kind: wire.Anthropic, sse: true, strm: true, where: "stream writer",
			body: fmt.Sprintf(`{"model":"toy","max_tokens":%d,"messages":[{"role":"user","content":"hi"}],"stream":true}`, maxTokens),
			done: func(last string) bool { return strings.Contains(last, `"message_stop"`) }},
		{name: "anthropic whole", path: "/v1/messages", kind: wire.Anthropic, where: "handler of /v1/messages",
			body: fmt.Sprintf(`{"model":"toy","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, maxTokens),
			done: func(b string) bool { return strings.Contains(b, `"stop_reason":"max_tokens"`) }},
		{name: "ollama streamed", path: "/api/chat", kind: wire.Ollama, strm: true, where: "stream writer",
			body: fmt.Sprintf(`{"model":"toy","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":%d,"temperature":0}}`, maxTokens),
			done: func(last string) bool { return strings.Contains(last, `"done":true`) }},
		{name: "ollama whole", path: "/api/generate", kind: wire.Ollama, where: "handler of /api/generate",
			body: fmt.Sprintf(`{"model":"toy","prompt":"hi","stream":false,"options":{"num_predict":%d,"temperature":0}}`, maxTokens),
			done: func(b string) bool { return strings.Contains(b, `"done":true`) }},
		{name: "llama.cpp streamed", path: "/completion", kind: wire.Llama, sse: true, strm: true, where: "run",
			body: fmt.Sprintf(`{"prompt":"hi","n_predict":%d,"temperature":0,"stream":true}`, maxTokens),
			done: func(last string) bool { return strings.Contains(last, `"stop":true`) }},
		{name: "llama.cpp whole, two prompts", path: "/completion", kind: wire.Llama, where: "run",
			body: fmt.Sprintf(`{"prompt":["hi","ho"],"n_predict":%d,"temperature":0}`, maxTokens),
			done: func(b string) bool { return strings.Count(b, `"stop":true`) == 2 }},
	}
	for i := range shapes {
		shapes[i].parts = 1
		if strings.Contains(shapes[i].name, "n=2") || strings.Contains(shapes[i].name, "two prompts") {
			shapes[i].parts = 2
		}
	}
	return shapes
}

// events splits a streamed body into its events: each data payload, with
// its SSE event name when it has one ("name\x00data").
func events(body string, sse bool) []string {
	var out []string
	if !sse {
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			if line != "" {
				out = append(out, line)
			}
		}
		return out
	}
	for _, ev := range strings.Split(body, "\n\n") {
		name, data := "", ""
		for _, line := range strings.Split(ev, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		if data == "" {
			continue
		}
		if name != "" {
			data = name + "\x00" + data
		}
		out = append(out, data)
	}
	return out
}

// errorEvent checks that a stream ended with an error event in its API's
// shape, and returns the error's message.
func errorEvent(t *testing.T, r requestShape, body string, status int) string {
	t.Helper()
	evs := events(body, r.sse)
	if len(evs) == 0 {
		t.Fatalf("%s: an empty stream", r.name)
	}
	last := evs[len(evs)-1]
	if r.kind == wire.Anthropic {
		name, data, _ := strings.Cut(last, "\x00")
		if name != "error" {
			t.Fatalf("%s: the stream ends with event %q, want an error event: %q", r.name, name, body)
		}
		last = data
	}
	if last == "[DONE]" {
		t.Fatalf("%s: the failed stream ends with [DONE]: %q", r.name, body)
	}
	for _, ev := range evs[:len(evs)-1] {
		if strings.Contains(ev, `"error"`) {
			t.Errorf("%s: an error event before the last: %q", r.name, ev)
		}
	}
	return errorShapeOf(t, r.kind, status, []byte(last))
}

// logCapture records the ERROR records slog receives during a test.
type logCapture struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (c *logCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler           { return c }
func (c *logCapture) WithGroup(string) slog.Handler                { return c }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { rec[a.Key] = a.Value.String(); return true })
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	return nil
}

func (c *logCapture) take() []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.recs
	c.recs = nil
	return out
}

func captureErrors(t *testing.T) *logCapture {
	c := &logCapture{}
	old := slog.Default()
	slog.SetDefault(slog.New(c))
	t.Cleanup(func() { slog.SetDefault(old) })
	return c
}

// A panic on any goroutine that follows a generation ends that request —
// a 500 in its API's shape, or an error event on a stream already begun —
// is logged at ERROR with its stack and counted, cancels the request's
// generations (far from their max_tokens) so their lanes free, and the
// server answers the next request in full.
func TestPanicEndsOnlyItsRequest(t *testing.T) {
	ts := startToy(t, toyOptions{})
	logs := captureErrors(t)
	next := requestShapes(40)
	for i, r := range requestShapes(50000) {
		t.Run(r.name, func(t *testing.T) {
			before, cancelled := panics.Count(panics.Request), ts.sched.Stats().Cancelled
			setTokenHook(t, onceAt(3, func() { panic("injected: " + r.name) }))
			status, body := ts.post(t, r.path, r.body)
			if r.strm {
				if status != 200 {
					t.Fatalf("streamed: %d %s", status, body)
				}
				if msg := errorEvent(t, r, body, 500); !strings.Contains(msg, "internal error") {
					t.Errorf("error event says %q", msg)
				}
			} else {
				if status != 500 {
					t.Fatalf("want 500, got %d %s", status, body)
				}
				errorShapeOf(t, r.kind, status, []byte(body))
			}
			if got := panics.Count(panics.Request) - before; got != 1 {
				t.Errorf("%d panics counted, want 1", got)
			}
			recs := logs.take()
			if len(recs) != 1 || recs[0]["where"] != r.where || !strings.Contains(recs[0]["panic"], "injected") ||
				!strings.Contains(recs[0]["stack"], "goroutine") {
				t.Errorf("logged at ERROR: %v; want one record of a panic in the %s, with its stack", recs, r.where)
			}
			ts.waitIdle(t)
			if got := ts.sched.Stats().Cancelled - cancelled; got != uint64(r.parts) {
				t.Errorf("%d generations cancelled, want %d", got, r.parts)
			}

			r := next[i]
			status, body = ts.post(t, r.path, r.body)
			last := body
			if r.strm {
				evs := events(body, r.sse)
				last = evs[len(evs)-1]
			}
			if status != 200 || !r.done(last) {
				t.Fatalf("the next request: %d %s", status, body)
			}
		})
	}
	resp, err := nethttp.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("superfluid_panics_total{component=\"request\"} %d\n", panics.Count(panics.Request)); !strings.Contains(string(b), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}
