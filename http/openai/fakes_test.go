package openai

import (
	"bufio"
	"context"
	"io"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// testHost is the transport as the handlers see it, without a server:
// the request runs under a context of its own, a stream is written
// nowhere, and the class comes from the header or the zero class.
type testHost struct{ cache *task.CompletionCache }

func (testHost) RequestContext(*fasthttp.RequestCtx) (context.Context, func()) {
	return context.WithCancel(context.Background())
}

func (testHost) Stream(_ *fasthttp.RequestCtx, sse bool, begin func(rctx context.Context) error,
	produce func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter)) error {
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if begin != nil {
		if err := begin(rctx); err != nil {
			return err
		}
	}
	ew := wire.NewEventWriter(wire.OpenAI, sse)
	ew.Attach(bufio.NewWriter(io.Discard))
	produce(rctx, cancel, ew)
	return nil
}

func (testHost) Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return wire.Class(ctx, field, 0)
}

func (h testHost) CompletionCache() *task.CompletionCache { return h.cache }
func (testHost) FIMModel() string                         { return "" }
func (testHost) Available() []wire.ModelEntry             { return nil }
func (testHost) Loaded() []wire.LoadedEntry               { return nil }
func (testHost) CacheStatus(*fasthttp.RequestCtx) any     { return nil }
func (testHost) Settings() wire.Settings                  { return wire.Settings{} }
func (testHost) FIMFor(_ context.Context, m *task.Model) (*task.Model, func()) {
	return m, func() {}
}
func (testHost) Pinner(*fasthttp.RequestCtx) wire.CachePinner                          { return nil }
func (testHost) Store() wire.ModelStore                                                { return nil }
func (testHost) Stopping() context.Context                                             { return context.Background() }
func (testHost) ProgressBody(_ *fasthttp.RequestCtx, body io.ReadCloser) io.ReadCloser { return body }

// testAPI is the handlers over testHost, with a completion cache of size.
func testAPI(size int) *api {
	return &api{host: testHost{cache: task.NewCompletionCache(size)}, stores: &Stores{}}
}
