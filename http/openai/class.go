package openai

import (
	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// classing is how a request's scheduling class is chosen: a class the
// caller named (the X-Superfluid-Class header; a batch's class) wins,
// else each route's own rule. named is read at once, the class itself
// only when a route asks for it, so that a request's other faults are
// found in the order they always were.
type classing struct {
	named bool
	get   func() (sched.Class, error) // the named class, else the server's default
}

// classingOf is the class rule of a request over HTTP.
func (a *api) classingOf(ctx *fasthttp.RequestCtx) classing {
	return classing{named: wire.ClassSent(ctx), get: func() (sched.Class, error) { return a.host.Class(ctx, "") }}
}

// namedClass is the class rule of a request whose caller chose its class.
func namedClass(c sched.Class) classing {
	return classing{named: true, get: func() (sched.Class, error) { return c, nil }}
}

// plain is the class of a completion: the named one, else the default.
func (c classing) plain() (sched.Class, error) { return c.get() }

// chat is the class of a chat turn (task.ChatClass: tools make it an
// agent's unless a class was named).
func (c classing) chat(t *task.Chat) (sched.Class, error) {
	return task.ChatClass(t, c.named, c.get)
}

// embed is the class of an embedding request: the named one, else
// background, since embeddings are bulk work.
func (c classing) embed() (sched.Class, error) {
	if !c.named {
		return sched.Background, nil
	}
	return c.get()
}
