package openai

import (
	"superfluid/http/wire"
	"superfluid/http/wire/wiretest"
	"superfluid/task"
)

// testAPI is the handlers over a server-less host (the zero class by
// default), with a completion cache of size.
func testAPI(size int) *api {
	return &api{host: wiretest.Host{API: wire.OpenAI, Cache: task.NewCompletionCache(size)}, stores: &Stores{}}
}
