package wire

// Following a started job (package task) to its end as the APIs render it.
// The API packages call the rest of the request core directly: WriteError
// and every error event go through AsError, which words a task.Error as
// the API's own failure.

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
)

// ErrShutDown ends a generation the scheduler stopped because the server
// is shutting down (the drain period ran out before it finished).
var ErrShutDown = FromTask(task.ErrShutDown)

// RunJob runs a started job to its end (task.Job.Run); the sink hears
// failures as Errors.
func RunJob(ctx context.Context, job *task.Job, sink task.SinkFuncs) ([]task.Turn, error) {
	if failed := sink.OnFailed; failed != nil {
		sink.OnFailed = func(err error) { failed(Convert(err)) }
	}
	turns, err := job.Run(ctx, sink)
	return turns, Convert(err)
}

// TurnOut is an assistant turn as it was generated and read.
type TurnOut struct {
	task.Outcome
	Reasoning string
	Content   string
	Calls     []reply.ToolCall
}

// TurnOutOf is a core turn as the APIs render it.
func TurnOutOf(t task.Turn) TurnOut {
	return TurnOut{Outcome: t.Outcome, Reasoning: t.Reasoning, Content: t.Content, Calls: t.Calls}
}

// FinishReason is the turn's end as OpenAI names it: "tool_calls" when the
// model stopped after calling, else the generation's own end.
func (t *TurnOut) FinishReason() string {
	if len(t.Calls) > 0 && t.Finish == "stop" {
		return "tool_calls"
	}
	return t.Finish
}

// FollowOne runs a job of one chat turn to its end; emit, when not nil,
// hears each delta with the reply events it completed (task.Sink.Delta).
func FollowOne(ctx context.Context, job *task.Job, emit func(evs []reply.Event, d *task.Delta) error) (TurnOut, error) {
	turns, err := RunJob(ctx, job, task.SinkFuncs{OnDelta: func(_ int, evs []reply.Event, d *task.Delta) error {
		if emit == nil {
			return nil
		}
		return emit(evs, d)
	}})
	if len(turns) == 0 {
		return TurnOut{}, err
	}
	return TurnOutOf(turns[0]), err
}

// TurnClass is the class a chat turn runs in: the X-Superfluid-Class
// header when sent, else task.ChatClass's rule (a turn with tools is an
// agent's), else the server's default.
func TurnClass(ctx *fasthttp.RequestCtx, h Host, t *task.Chat) (sched.Class, error) {
	return task.ChatClass(t, ClassSent(ctx), func() (sched.Class, error) { return h.Class(ctx, "") })
}
