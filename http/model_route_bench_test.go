package http

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

// What reading a request's model costs before its handler parses it.
func BenchmarkModelWantOf(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		body := `{"messages":[{"role":"user","content":"` + strings.Repeat(`word \" `, c.size/8) + `"}],"max_tokens":5,"model":"m"}`
		b.Run(c.name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/v1/chat/completions")
			ctx.Request.SetBodyString(body)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if modelWantOf(&ctx, wire.OpenAI).Name != "m" {
					b.Fatal("no model")
				}
			}
		})
	}
}
