package http

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/keys"
)

// modelWantOf reads which model a request asks for, before its handler
// parses it: the body's "model" (Ollama's /api/show also takes "name"),
// or the "model" query argument of a GET (peekFields reads only those
// members). A value that is not a string — or a body that is not JSON —
// names the default model here; the handler
// then refuses the request with the API's own 400. A request fills in the
// middle on /infill, and on /v1/completions and /api/generate when its
// suffix is a non-empty string (as those handlers decide it).
func modelWantOf(ctx *fasthttp.RequestCtx, kind wire.API) ModelWant {
	if ctx.IsGet() || ctx.IsHead() {
		return ModelWant{Name: string(ctx.QueryArgs().Peek("model"))}
	}
	return bodyModelWant(string(ctx.Path()), ctx.PostBody(), kind)
}

// bodyModelWant is the model a request's body asks for on path.
func bodyModelWant(path string, body []byte, kind wire.API) ModelWant {
	f := peekFields(body, "model", "name", "suffix", "keep_alive")
	want := ModelWant{Name: stringOf(f["model"])}
	if want.Name == "" && path == "/api/show" {
		want.Name = stringOf(f["name"])
	}
	switch path {
	case "/infill":
		want.FIM = true
	case "/v1/completions", "/completions", "/api/generate":
		want.FIM = stringOf(f["suffix"]) != ""
	}
	if kind == wire.Ollama {
		// An invalid keep_alive is the handler's 400; here it is unset.
		if d, ok, err := wire.KeepAlive(f["keep_alive"]); err == nil && ok {
			want.KeepAlive, want.HasKeepAlive = d, true
		}
	}
	return want
}

// stringOf is raw's string value, "" when it is no JSON string.
func stringOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// maxEchoedName bounds how much of an unknown model's name an error quotes.
const maxEchoedName = 200

// modelError words a failed Acquire in the API's shape: an unknown model
// is each API's own 404, a load that cannot fit a 507 naming the sizes,
// anything else a failed load (500).
func modelError(kind wire.API, name string, err error) *wire.Error {
	if len(name) > maxEchoedName { // a name is echoed, not a body
		name = strings.ToValidUTF8(name[:maxEchoedName], "") + "…"
	}
	switch {
	case errors.Is(err, ErrModelNotFound):
		switch kind {
		case wire.Ollama:
			return wire.NotFound("model %q not found, try pulling it first", name)
		case wire.Anthropic:
			return wire.NotFound("model: %s", name)
		}
		return wire.NotFound("model %q not found; GET /v1/models lists the models this server serves", name)
	case errors.Is(err, ErrModelNoRoom):
		return &wire.Error{Status: fasthttp.StatusInsufficientStorage, Type: "insufficient_memory", Code: "model_no_room", Msg: err.Error()}
	}
	return wire.ServerError("loading model %q: %v", name, err)
}

// modelHold keeps a request's model acquired: the route holds it while the
// handler runs and a streamed response while it writes (streamResponse),
// and the last of them releases the model.
type modelHold struct {
	n       atomic.Int32
	release func()
}

type modelHoldKey struct{}

func newModelHold(release func()) *modelHold {
	h := &modelHold{release: release}
	h.n.Store(1)
	return h
}

func (h *modelHold) add() { h.n.Add(1) }

// then runs f after the release, once the hold ends; call it before the
// hold is shared.
func (h *modelHold) then(f func()) {
	release := h.release
	h.release = func() { release(); f() }
}

func (h *modelHold) done() {
	if h.n.Add(-1) == 0 {
		h.release()
	}
}

// holdModel extends the request's hold on its model to a stream the
// handler leaves behind; the returned function ends that extension.
func holdModel(ctx *fasthttp.RequestCtx) func() {
	h, _ := ctx.UserValue(modelHoldKey{}).(*modelHold)
	if h == nil {
		return func() {}
	}
	h.add()
	return h.done
}

// acquireModel resolves the request's model through the registry. A key
// whose policy lists models gets any other name answered as an unknown
// model, before anything loads; a request naming none gets the default
// model only when the list names it.
func (s *Server) acquireModel(ctx *fasthttp.RequestCtx, ms Models, r route, client *keys.Client) (*Model, *modelHold, error) {
	kind := r.kind
	want := modelWantOf(ctx, kind)
	if r.modelOf != nil {
		// A body that is not JSON (a multipart upload) names its model in
		// the route's own way.
		want = ModelWant{Name: r.modelOf(ctx)}
	}
	if client != nil && want.Name != "" && !client.AllowsModel(want.Name, SameModelName) {
		client.RefuseModel()
		return nil, nil, modelError(kind, want.Name, ErrModelNotFound)
	}
	m, hold, err := acquire(ctx, ms, want, kind)
	if err == nil && client != nil && want.Name == "" && !client.AllowsModel(m.Name, SameModelName) {
		hold.done()
		client.RefuseModel()
		return nil, nil, modelError(kind, m.Name, ErrModelNotFound)
	}
	return m, hold, err
}

// acquire loads the model want names, or waits for its load, until ctx
// ends (a request's: until the server shuts down).
func acquire(ctx context.Context, ms Models, want ModelWant, kind wire.API) (*Model, *modelHold, error) {
	m, release, err := ms.Acquire(ctx, want)
	if err != nil {
		return nil, nil, modelError(kind, want.Name, err)
	}
	if m == nil {
		release()
		return nil, nil, wire.ServerError("model %q: the registry returned no model", want.Name)
	}
	return m, newModelHold(release), nil
}
