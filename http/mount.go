package http

import (
	"context"
	"io"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// serverHost is the server as the API packages see it (wire.Host).
type serverHost struct{ s *Server }

var _ wire.Host = serverHost{}

// host is s as the API packages see it; the handlers still in this
// package start their streams through it too.
func (s *Server) host() serverHost { return serverHost{s} }

func (h serverHost) RequestContext(ctx *fasthttp.RequestCtx) (context.Context, func()) {
	return h.s.requestContext(ctx)
}

// Stream is the one start of a streamed response: the request's context,
// the work submitted under it, then the events on the writer goroutine
// (streamResponse holds the drain gate and the model until they end).
func (h serverHost) Stream(ctx *fasthttp.RequestCtx, sse bool, begin func(rctx context.Context) error,
	produce func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter)) error {
	rctx, done := h.s.requestContext(ctx)
	rctx = task.Streaming(rctx) // its lanes' tokens are read as they come
	if begin != nil {
		if err := begin(rctx); err != nil {
			done()
			return err
		}
	}
	streamResponse(ctx, sse, func(ew *wire.EventWriter) {
		defer done()
		produce(rctx, done, ew)
	})
	return nil
}

func (h serverHost) Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return h.s.requestClass(ctx, field)
}

func (h serverHost) CompletionCache() *task.CompletionCache { return h.s.fimCache }

func (h serverHost) FIMModel() string {
	if ms := h.s.registry(); ms != nil {
		return ms.FIMName()
	}
	return ""
}

// FIMFor is the model that answers m's fill-in-the-middle requests: the
// FIM model when there is one, else m; release ends the hold on it.
func (h serverHost) FIMFor(ctx context.Context, m *task.Model) (*task.Model, func()) {
	ms := h.s.registry()
	if ms == nil || ms.FIMName() == "" {
		return m, func() {}
	}
	fm, release, err := ms.Acquire(ctx, ModelWant{Name: m.Name, FIM: true})
	if err != nil || fm == nil {
		return m, func() {}
	}
	return &fm.Model, release
}

func (h serverHost) CacheStatus(ctx *fasthttp.RequestCtx) any {
	m, _ := ctx.UserValue(requestModelKey{}).(*Model)
	if m == nil {
		return nil
	}
	if st := cacheStatusOf(m); st != nil {
		return st
	}
	return nil
}

func (h serverHost) ProgressBody(ctx *fasthttp.RequestCtx, body io.ReadCloser) io.ReadCloser {
	return h.s.progressBody(ctx, body)
}

func (h serverHost) Pinner(ctx *fasthttp.RequestCtx) wire.CachePinner {
	m, _ := ctx.UserValue(requestModelKey{}).(*Model)
	if m == nil {
		return nil
	}
	p, _ := m.Cache.(wire.CachePinner)
	if p == nil {
		return nil
	}
	if store, err := h.s.responses.Sessions(); err == nil {
		return durablePinner{cache: p, store: store, model: m.Desc.Identity}
	}
	return p
}

func (h serverHost) Settings() wire.Settings {
	return wire.Settings{Version: h.s.cfg.Version, Started: h.s.started, KeepBillingHeader: h.s.cfg.KeepBillingHeader, RemoteMedia: h.s.cfg.RemoteMedia}
}

func (h serverHost) Store() wire.ModelStore { return h.s.modelStore() }

func (h serverHost) Stopping() context.Context { return h.s.stopping }

func (h serverHost) Available(ctx *fasthttp.RequestCtx) []wire.ModelEntry {
	ms := h.s.registry()
	if ms == nil {
		return nil
	}
	var out []wire.ModelEntry
	for _, mi := range ms.Available() {
		if !visibleModel(ctx, mi.Name) {
			continue
		}
		e := wire.ModelEntry{Name: mi.Name, Path: mi.Path, Size: mi.Size, Modified: mi.Modified, Digest: mi.Digest}
		if mi.Loaded != nil {
			e.Loaded = &mi.Loaded.Model
		}
		out = append(out, e)
	}
	return out
}

func (h serverHost) Loaded(ctx *fasthttp.RequestCtx) []wire.LoadedEntry {
	ms := h.s.registry()
	if ms == nil {
		return nil
	}
	var out []wire.LoadedEntry
	for _, lm := range ms.Loaded() {
		if lm.Model != nil && !visibleModel(ctx, lm.Model.Name) {
			continue
		}
		e := wire.LoadedEntry{Size: lm.Size, ExpiresAt: lm.ExpiresAt, InFlight: lm.InFlight, Pinned: lm.Pinned}
		if lm.Model != nil {
			e.Model = &lm.Model.Model
			e.PrefixCache = lm.Model.Cache
			if st := cacheStatusOf(lm.Model); st != nil {
				e.Cache = st
			}
		}
		out = append(out, e)
	}
	return out
}

// requestModelKey is the RequestCtx user value under which a mounted
// route's request leaves its *Model, for what only the transport knows of
// it (CacheStatus, Pinner).
type requestModelKey struct{}

// mounted is an API package's route as the route table holds it.
func mounted(wr wire.Route) route {
	handle := wr.Handle
	return route{
		method: wr.Method, kind: wr.API, public: wr.Public, loading: wr.Loading, anyModel: wr.AnyModel,
		embeds: wr.Embeds, generates: wr.Generates, body: bodyOf(wr), modelOf: wr.ModelOf,
		handler: func(_ *Server, ctx *fasthttp.RequestCtx, m *Model) error {
			if m == nil {
				return handle(ctx, nil)
			}
			ctx.SetUserValue(requestModelKey{}, m)
			return handle(ctx, keyedModel(ctx, &m.Model))
		},
	}
}

// bodyOf is a route's body limit class.
func bodyOf(wr wire.Route) bodyKind {
	switch wr.Body {
	case wire.BodyControl:
		return bodyControl
	case wire.BodyConversation:
		return bodyConversation
	case wire.BodyUpload:
		return bodyUpload
	}
	return bodyKindOf(wr.Method, wr.Path)
}
