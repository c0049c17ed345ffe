package anthropic

import (
	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
)

// testHost is the part of a server the decoder tests reach: the class
// header with the default class, and the billing-header setting.
type testHost struct {
	wire.Host // nil: the tests call nothing else
	settings  wire.Settings
}

func (h testHost) Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return wire.Class(ctx, field, sched.Chat)
}

func (h testHost) Settings() wire.Settings { return h.settings }

// testAPI is the handlers over a test host; keepBilling is
// --keep-billing-header.
func testAPI(keepBilling bool) *api {
	return &api{host: testHost{settings: wire.Settings{KeepBillingHeader: keepBilling}}}
}
