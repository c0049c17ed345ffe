// Package wiretest is a wire.Host for the API packages' handler tests:
// the transport without a server, so that a handler runs over a fasthttp
// RequestCtx alone.
package wiretest

import (
	"bufio"
	"context"
	"io"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// Host answers as a server with no models, no store and no prefix cache
// would: each request runs under a context of its own, a stream is written
// nowhere, the class comes from the request's header or DefaultClass, and
// a FIM request is answered by the model it named.
type Host struct {
	API          wire.API // the dialect streamed events are written in
	DefaultClass sched.Class
	Config       wire.Settings
	Cache        *task.CompletionCache // nil: no completion cache
}

var _ wire.Host = Host{}

func (Host) RequestContext(*fasthttp.RequestCtx) (context.Context, func()) {
	return context.WithCancel(context.Background())
}

func (h Host) Stream(_ *fasthttp.RequestCtx, sse bool, begin func(rctx context.Context) error,
	produce func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter)) error {
	rctx, cancel := context.WithCancel(task.Streaming(context.Background()))
	defer cancel()
	if begin != nil {
		if err := begin(rctx); err != nil {
			return err
		}
	}
	ew := wire.NewEventWriter(h.API, sse)
	ew.Attach(bufio.NewWriter(io.Discard))
	produce(rctx, cancel, ew)
	return nil
}

func (h Host) Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return wire.Class(ctx, field, h.DefaultClass)
}

func (h Host) CompletionCache() *task.CompletionCache { return h.Cache }
func (Host) FIMModel() string                         { return "" }
func (Host) FIMFor(_ context.Context, m *task.Model) (*task.Model, func()) {
	return m, func() {}
}
func (Host) Available(*fasthttp.RequestCtx) []wire.ModelEntry                      { return nil }
func (Host) Loaded(*fasthttp.RequestCtx) []wire.LoadedEntry                        { return nil }
func (Host) CacheStatus(*fasthttp.RequestCtx) any                                  { return nil }
func (h Host) Settings() wire.Settings                                             { return h.Config }
func (Host) Store() wire.ModelStore                                                { return nil }
func (Host) Stopping() context.Context                                             { return context.Background() }
func (Host) Pinner(*fasthttp.RequestCtx) wire.CachePinner                          { return nil }
func (Host) ProgressBody(_ *fasthttp.RequestCtx, body io.ReadCloser) io.ReadCloser { return body }
