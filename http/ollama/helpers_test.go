package ollama

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// testHost is the server as the decoder tests need it: the class header
// over the default class (chat), a version, no FIM model.
type testHost struct {
	wire.Host
	version string
	cache   *task.CompletionCache
}

func (h testHost) Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return wire.Class(ctx, field, sched.Chat)
}

func (h testHost) Settings() wire.Settings { return wire.Settings{Version: h.version} }

func (h testHost) FIMFor(_ context.Context, m *task.Model) (*task.Model, func()) { return m, func() {} }

func (h testHost) CompletionCache() *task.CompletionCache { return h.cache }

func (h testHost) RequestContext(ctx *fasthttp.RequestCtx) (context.Context, func()) {
	return context.WithCancel(context.Background())
}

func testAPI() *api { return &api{host: testHost{cache: task.NewCompletionCache(8)}} }
