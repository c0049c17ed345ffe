package ollama

import (
	"superfluid/http/wire"
	"superfluid/http/wire/wiretest"
	"superfluid/sched"
	"superfluid/task"
)

// testHost is the server as the decoder tests need it: the class header
// over the default class (chat), settings, no FIM model.
func testHost(settings wire.Settings, cache *task.CompletionCache) wiretest.Host {
	return wiretest.Host{API: wire.Ollama, DefaultClass: sched.Chat, Config: settings, Cache: cache}
}

func testAPI() *api { return &api{host: testHost(wire.Settings{}, task.NewCompletionCache(8))} }
