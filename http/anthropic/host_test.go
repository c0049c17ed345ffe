package anthropic

import (
	"superfluid/http/wire"
	"superfluid/http/wire/wiretest"
	"superfluid/sched"
)

// testAPI is the handlers over a server-less host with the default class
// (chat); keepBilling is --keep-billing-header.
func testAPI(keepBilling bool) *api {
	return &api{host: wiretest.Host{API: wire.Anthropic, DefaultClass: sched.Chat, Config: wire.Settings{KeepBillingHeader: keepBilling}}}
}
