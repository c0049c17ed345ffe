package http

import (
	"context"
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

// A mounted route takes its flags from the wire.Route, its body class from
// the transport's rule unless it names one, and its handler gets the
// request's task.Model; its errors come back in its API's shape.
func TestMountedRoute(t *testing.T) {
	handle := func(*fasthttp.RequestCtx, *task.Model) error { return nil }
	r := mounted(wire.Route{Method: "POST", Path: "/x", API: wire.Llama, Handle: handle, Public: true, Generates: true})
	if r.method != "POST" || r.kind != wire.Llama || !r.public || !r.generates || r.embeds || r.loading || r.anyModel {
		t.Errorf("mounted flags: %+v", r)
	}
	if r.body != bodyConversation {
		t.Errorf("a POST route's body class by the transport's rule: %v, want %v", r.body, bodyConversation)
	}
	if up := mounted(wire.Route{Method: "POST", Path: "/x", Handle: handle, Body: wire.BodyUpload}); up.body != bodyUpload {
		t.Errorf("a route naming its body class: %v, want %v", up.body, bodyUpload)
	}

	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	var got *task.Model
	seam := mounted(wire.Route{Method: "POST", Path: "/test/seam", API: wire.Llama, Handle: func(_ *fasthttp.RequestCtx, tm *task.Model) error {
		got = tm
		return wire.BadParam("field", "refused by the handler")
	}})
	s.routes["/test/seam"] = []route{seam}
	c := memServer(t, s)
	status, _, b := call(t, c, "POST", "/test/seam", `{}`)
	if got != &m.Model {
		t.Errorf("the handler got model %p, want the request's %p", got, &m.Model)
	}
	if status != 400 {
		t.Fatalf("status %d, want 400: %s", status, b)
	}
	errorShapeOf(t, wire.Llama, status, b)
}

// Host.Stream: a refusal from begin is the handler's error (a status code,
// no stream); otherwise produce writes the events under the request's
// context, which has ended by the time the response has.
func TestHostStream(t *testing.T) {
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	var streamCtx context.Context
	begun := false
	s.routes["/test/refused"] = []route{mounted(wire.Route{Method: "GET", Path: "/test/refused", API: wire.OpenAI,
		Handle: func(ctx *fasthttp.RequestCtx, _ *task.Model) error {
			return s.host().Stream(ctx, true, func(context.Context) error {
				return wire.Unavailable("refused before the stream")
			}, func(context.Context, context.CancelFunc, *wire.EventWriter) {
				t.Error("produce ran after begin failed")
			})
		}})}
	s.routes["/test/stream"] = []route{mounted(wire.Route{Method: "GET", Path: "/test/stream", API: wire.OpenAI,
		Handle: func(ctx *fasthttp.RequestCtx, _ *task.Model) error {
			return s.host().Stream(ctx, true, func(context.Context) error {
				begun = true
				return nil
			}, func(rctx context.Context, _ context.CancelFunc, ew *wire.EventWriter) {
				streamCtx = rctx
				ew.Raw("data: one\n\n")
			})
		}})}
	c := memServer(t, s)
	status, _, b := call(t, c, "GET", "/test/refused", "")
	if status != 503 {
		t.Fatalf("refused stream: %d, want 503: %s", status, b)
	}
	errorShapeOf(t, wire.OpenAI, status, b)

	status, _, b = call(t, c, "GET", "/test/stream", "")
	if status != 200 || string(b) != "data: one\n\n" || !begun {
		t.Fatalf("stream: %d %q (begun %v)", status, b, begun)
	}
	if streamCtx == nil || !errors.Is(streamCtx.Err(), context.Canceled) {
		t.Errorf("the stream's context after the response: %v, want cancelled", streamCtx)
	}
}

// The host's listings are the registry's, with each model as the request
// core's: what /v1/models- and /api/tags-style handlers read.
func TestHostListings(t *testing.T) {
	s, err := NewServer(Config{Version: "v9.9"})
	if err != nil {
		t.Fatal(err)
	}
	h := s.host()
	var ctx fasthttp.RequestCtx
	if len(h.Available(&ctx)) != 0 || len(h.Loaded(&ctx)) != 0 {
		t.Errorf("listings before the server has models: %v %v", h.Available(&ctx), h.Loaded(&ctx))
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	av := h.Available(&ctx)
	if len(av) != 1 || av[0].Name != m.Name || av[0].Loaded != &m.Model || av[0].Digest != m.Desc.Identity {
		t.Errorf("Available: %+v", av)
	}
	ld := h.Loaded(&ctx)
	if len(ld) != 1 || ld[0].Model != &m.Model || !ld[0].Pinned || ld[0].Size != int64(m.Desc.ModelBytes) {
		t.Errorf("Loaded: %+v", ld)
	}
	if st := h.Settings(); st.Version != "v9.9" || !st.Started.Equal(s.started) {
		t.Errorf("Settings: %+v", st)
	}
}
