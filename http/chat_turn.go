package http

import (
	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// Each chat API reads its own fields into a task.Chat and plans it with
// task.PlanChat; what stays here is the transport's part of a turn.

// isNull reports an absent or null field (task.IsNull), as every API's
// decoding asks it.
var isNull = task.IsNull

// turnClass is the class a chat turn runs in: the X-Superfluid-Class
// header when sent, else task.ChatClass's rule (a turn with tools is an
// agent's), else the server's default.
func (s *Server) turnClass(ctx *fasthttp.RequestCtx, t *task.Chat) (sched.Class, error) {
	return task.ChatClass(t, wire.ClassSent(ctx), func() (sched.Class, error) { return s.requestClass(ctx, "") })
}
