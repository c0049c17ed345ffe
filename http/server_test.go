package http

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"superfluid/http/wire"
)

// The server's own contract, without a model or an engine: what it answers
// while the model loads, and how it drains. Served over an in-memory
// listener; the e2e package covers the same over real sockets.

// memServer serves s on an in-memory listener and returns a client for it.
func memServer(t *testing.T, s *Server) *nethttp.Client {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.srv.Shutdown()
		<-done
	})
	return &nethttp.Client{
		Timeout: 30 * time.Second,
		Transport: &nethttp.Transport{
			DialContext:       func(context.Context, string, string) (net.Conn, error) { return ln.Dial() },
			DisableKeepAlives: true,
		},
	}
}

// call sends one request and returns the status, the Connection header
// and the body.
func call(t *testing.T, c *nethttp.Client, method, path, body string) (int, string, []byte) {
	t.Helper()
	status, conn, b, err := tryCall(c, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, conn, b
}

// tryCall is call for goroutines other than the test's.
func tryCall(c *nethttp.Client, method, path, body string) (int, string, []byte, error) {
	req, err := nethttp.NewRequest(method, "http://superfluid"+path, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	conn := resp.Header.Get("Connection")
	if resp.Close {
		conn = "close"
	}
	return resp.StatusCode, conn, b, nil
}

// errorShapeOf decodes an error body in kind's shape and returns its
// message; it fails the test when the shape is not the API's.
func errorShapeOf(t *testing.T, kind wire.API, status int, body []byte) string {
	t.Helper()
	var v struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s error body %q: %v", kind, body, err)
	}
	var inner struct {
		Code    any     `json:"code"`
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
	}
	switch kind {
	case wire.Ollama:
		var msg string
		if json.Unmarshal(v.Error, &msg) != nil || msg == "" {
			t.Fatalf("ollama error %q: want {\"error\": \"…\"}", body)
		}
		return msg
	case wire.Anthropic:
		if v.Type != "error" {
			t.Fatalf("anthropic error %q: want type \"error\"", body)
		}
	}
	if json.Unmarshal(v.Error, &inner) != nil || inner.Message == "" || inner.Type == "" {
		t.Fatalf("%s error %q: want error.message and error.type", kind, body)
	}
	if kind == wire.Llama {
		if code, ok := inner.Code.(float64); !ok || int(code) != status {
			t.Fatalf("llama.cpp error %q: code should be the status %d", body, status)
		}
	}
	return inner.Message
}

// While the model loads, /health answers 503 in llama.cpp's shape (editors
// poll it and wait), routes that need the model answer 503 in their own
// API's shape, and the few that describe the server (Ollama's probes)
// already answer. Once the model is set, /health is 200.
func TestServerWhileLoading(t *testing.T) {
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := memServer(t, s)
	status, _, body := call(t, c, "GET", "/health", "")
	if status != 503 {
		t.Fatalf("/health while loading: %d %s", status, body)
	}
	if msg := errorShapeOf(t, wire.Llama, 503, body); msg != "Loading model" {
		t.Errorf("/health while loading says %q, llama.cpp says \"Loading model\"", msg)
	}
	for _, ri := range s.Routes() {
		path := ri.Path
		if path == "/health" {
			continue
		}
		rs, _, _ := s.lookup(path)
		r := rs[slices.IndexFunc(rs, func(r route) bool { return r.method == ri.Method })]
		method, body := r.method, ""
		if method == "POST" {
			body = `{}`
		}
		if path == "/v1/status/events" {
			method = "HEAD" // a stream that never ends: its status is the answer
		}
		status, _, b := call(t, c, method, path, body)
		if r.loading {
			if status >= 500 {
				t.Errorf("%s answers while loading, but gave %d %s", path, status, b)
			}
			continue
		}
		if status != 503 {
			t.Errorf("%s %s while loading: %d %s", method, path, status, b)
			continue
		}
		errorShapeOf(t, r.kind, status, b)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	if status, _, body := call(t, c, "GET", "/health", ""); status != 200 || string(body) != `{"status":"ok"}` {
		t.Errorf("/health once loaded: %d %s", status, body)
	}
}

// Routes lists exactly the route table, sorted, with each route's API.
func TestServerRoutes(t *testing.T) {
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	routes := s.Routes()
	n := 0
	for _, rs := range s.routes {
		n += len(rs)
	}
	if len(routes) != n {
		t.Fatalf("%d routes listed, %d in the table", len(routes), n)
	}
	for i, r := range routes {
		if i > 0 && (routes[i-1].Path > r.Path || routes[i-1].Path == r.Path && routes[i-1].Method >= r.Method) {
			t.Errorf("not sorted at %s %s", r.Method, r.Path)
		}
		rs := s.routes[r.Path]
		i := slices.IndexFunc(rs, func(in route) bool { return in.method == r.Method })
		if i < 0 || r.API != rs[i].kind.String() || r.Public != rs[i].public {
			t.Errorf("%s: listed %+v", r.Path, r)
		}
	}
}

// Paths with an {id} match exactly one non-empty segment there.
func TestServerPathPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern, path, id string
		ok                bool
	}{
		{"/v1/files/{id}", "/v1/files/file-1", "file-1", true},
		{"/v1/files/{id}/content", "/v1/files/file-1/content", "file-1", true},
		{"/v1/files/{id}", "/v1/files/", "", false},
		{"/v1/files/{id}", "/v1/files/a/b", "", false},
		{"/v1/files/{id}/content", "/v1/files//content", "", false},
		{"/v1/files/{id}/content", "/v1/files/a/contents", "", false},
		{"/v1/batches/{id}/cancel", "/v1/batches/b/cancel", "b", true},
		{"/v1/conversations/{id}/items/{id}", "/v1/conversations/c/items/i", "c/i", true},
		{"/v1/conversations/{id}/items/{id}", "/v1/conversations/c/items/", "", false},
	} {
		id, ok := matchPattern(c.pattern, c.path)
		if id != c.id || ok != c.ok {
			t.Errorf("%s ~ %s: %q %v", c.pattern, c.path, id, ok)
		}
	}
}

// Shutdown refuses new work with 503 (and Connection: close) in each API's
// shape while a running request finishes — a whole response held in its
// handler, or a streamed one that fasthttp writes after its handler has
// returned — and returns only once it has ended.
func TestServerDrainWaitsForRunningWork(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "streamed"}[streamed]
		t.Run(name, func(t *testing.T) { drainWhileRunning(t, streamed) })
	}
}

func drainWhileRunning(t *testing.T, streamed bool) {
	s, err := NewServer(Config{Drain: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	entered, release := make(chan struct{}), make(chan struct{})
	want := "whole done"
	s.routes["/test/running"] = []route{{method: "GET", kind: wire.OpenAI, handler: func(_ *Server, ctx *fasthttp.RequestCtx, _ *Model) error {
		if !streamed {
			close(entered)
			<-release
			ctx.SetBodyString(want)
			return nil
		}
		streamResponse(ctx, true, func(ew *wire.EventWriter) {
			ew.Raw("data: first\n\n")
			close(entered)
			<-release
			ew.Raw("data: last\n\n")
		})
		return nil
	}}}
	if streamed {
		want = "data: first\n\ndata: last\n\n"
	}
	c := memServer(t, s)
	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		status, _, b, err := tryCall(c, "GET", "/test/running", "")
		answered <- answer{status, string(b), err}
	}()
	<-entered

	shutdown := make(chan error, 1)
	go func() { shutdown <- s.Shutdown(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for !s.gate.isDraining() {
		if time.Now().After(deadline) {
			t.Fatal("Shutdown never started draining")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for path, kind := range map[string]wire.API{"/v1/models": wire.OpenAI, "/metrics": wire.Llama, "/api/tags": wire.Ollama, "/v1/messages": wire.Anthropic} {
		rs, ok := s.routes[path]
		if !ok {
			continue
		}
		status, conn, b := call(t, c, rs[0].method, path, `{}`)
		if status != 503 || conn != "close" {
			t.Errorf("%s while draining: %d, Connection %q: %s", path, status, conn, b)
			continue
		}
		errorShapeOf(t, kind, status, b)
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) while a request was still running", err)
	default:
	}
	close(release)
	if a := <-answered; a.err != nil || a.status != 200 || a.body != want {
		t.Errorf("the draining request ended with %d %q (%v), want 200 %q", a.status, a.body, a.err, want)
	}
	if err := <-shutdown; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// A streamed response whose client has gone still ends the drain: the
// stream's writer fails and returns, and Shutdown does not wait out its
// whole drain period for it.
func TestServerDrainEndsWithAbandonedStream(t *testing.T) {
	s, err := NewServer(Config{Drain: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	started := make(chan struct{})
	s.routes["/test/stream"] = []route{{method: "GET", kind: wire.OpenAI, handler: func(_ *Server, ctx *fasthttp.RequestCtx, _ *Model) error {
		streamResponse(ctx, true, func(ew *wire.EventWriter) {
			close(started)
			for ew.Raw("data: tick\n\n") == nil {
				time.Sleep(time.Millisecond)
			}
		})
		return nil
	}}}
	ln := fasthttputil.NewInmemoryListener()
	go s.Serve(ln)
	conn, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("GET /test/stream HTTP/1.1\r\nHost: x\r\n\r\n"))
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	<-started
	conn.Close()
	begun := time.Now()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if waited := time.Since(begun); waited > 30*time.Second {
		t.Errorf("Shutdown waited %v for a stream whose client was gone", waited)
	}
}
