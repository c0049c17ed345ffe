package wire

import (
	"github.com/valyala/fasthttp"

	"superfluid/sched"
)

// ClassHeader is the request header that names the scheduling class a
// request runs in.
const ClassHeader = "X-Superfluid-Class"

// Class is the class a chat or completion request runs in: the
// X-Superfluid-Class header, else field (a class the body named), else
// def (the server's default).
func Class(ctx *fasthttp.RequestCtx, field string, def sched.Class) (sched.Class, error) {
	name := string(ctx.Request.Header.Peek(ClassHeader))
	if name == "" {
		name = field
	}
	if name == "" {
		return def, nil
	}
	c, err := sched.ParseClass(name)
	if err != nil {
		return 0, BadParam("class", "%v", err)
	}
	return c, nil
}

// ClassSent reports whether the request named its class in the header.
func ClassSent(ctx *fasthttp.RequestCtx) bool { return len(ctx.Request.Header.Peek(ClassHeader)) > 0 }
