package anthropic

import (
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
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

func chatmlModel(t testing.TB, ctx int) *task.Model { return tasktest.ChatMLModel(t, ctx) }

// requestCtx is a request carrying body, as a handler would see it.
func requestCtx(body []byte) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetBody(body)
	return ctx
}

// checkRefusal checks that a decoder's error is a client error the API
// can show: a 4xx (or 501 for what the model cannot do) with a message.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var ae *wire.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a wire.Error", err, err)
	}
	if (ae.Status < 400 || ae.Status > 499) && ae.Status != 501 || ae.Msg == "" {
		t.Fatalf("refusal %+v is not a client error with a message", ae)
	}
}
