package openai

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
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

// start submits every choice of req (task.Start), its refusal as a wire
// error.
func start(ctx context.Context, m *task.Model, req *task.Request) (*task.Job, error) {
	job, err := task.Start(ctx, m, req)
	return job, wire.Convert(err)
}

// run follows a started job to its end (task.Job.Run); the sink hears a
// failure, and the caller the job's error, as wire errors.
func run(ctx context.Context, job *task.Job, sink task.SinkFuncs) ([]task.Turn, error) {
	if failed := sink.OnFailed; failed != nil {
		sink.OnFailed = func(err error) { failed(wire.Convert(err)) }
	}
	turns, err := job.Run(ctx, sink)
	return turns, wire.Convert(err)
}

// finishReason is a turn's end as OpenAI names it: "tool_calls" when the
// model stopped after calling, else the generation's own end.
func finishReason(t *task.Turn) string {
	if len(t.Calls) > 0 && t.Finish == "stop" {
		return "tool_calls"
	}
	return t.Finish
}

// The core's checks, their errors as wire errors.

func maxTokens(field string, n *int, ctxSize int) (int, error) {
	v, err := task.MaxTokens(field, n, ctxSize)
	return v, wire.Convert(err)
}

func sampling(m *task.Model, f task.SamplingFields) (engine.Sampling, error) {
	s, err := task.Sampling(m, f)
	return s, wire.Convert(err)
}

// result is a core call's result with its error as a wire error:
// result(task.PlanChat(…)).
func result[T any](v T, err error) (T, error) { return v, wire.Convert(err) }

// followTurn runs a job of one chat turn to its end; emit hears the reply
// events each delta completed.
func followTurn(ctx context.Context, job *task.Job, emit func(evs []reply.Event) error) (task.Turn, error) {
	turns, err := run(ctx, job, task.SinkFuncs{OnDelta: func(_ int, evs []reply.Event, _ *task.Delta) error { return emit(evs) }})
	if len(turns) == 0 {
		return task.Turn{}, err
	}
	return turns[0], err
}
