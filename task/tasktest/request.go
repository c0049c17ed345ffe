package tasktest

import (
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

// RequestCtx is a POST carrying body, as a handler would see it.
func RequestCtx(body []byte) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetBody(body)
	return ctx
}

// CheckRefusal checks that a decoder's error is a client error the API
// can show: a 4xx (or 501 for what the model cannot do) with a message.
func CheckRefusal(t *testing.T, err error) {
	t.Helper()
	// AsError words what an API answers: an Error, a request core's error,
	// or a 500 for anything else.
	ae := wire.AsError(err)
	if (ae.Status < 400 || ae.Status > 499) && ae.Status != 501 || ae.Msg == "" {
		t.Fatalf("refusal %v (%T) is not a client error with a message: %+v", err, err, ae)
	}
}
