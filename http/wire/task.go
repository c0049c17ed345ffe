package wire

// The request core's calls (package task) with their errors turned into
// Errors on the way back, so that every API words them as it renders its
// own failures; shared by the API packages.

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/fim"
	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
)

// Result is a task call's result with its error as an Error:
// Result(task.PlanChat(…)).
func Result[T any](v T, err error) (T, error) { return v, Convert(err) }

// ErrShutDown ends a generation the scheduler stopped because the server
// is shutting down (the drain period ran out before it finished).
var ErrShutDown = FromTask(task.ErrShutDown)

func CheckPrompt(m *task.Model, prompt []engine.Token) error {
	return Convert(task.CheckPrompt(m.Desc, prompt))
}

// MaxPromptBytes is the most prompt text m's context takes.
func MaxPromptBytes(m *task.Model) int { return task.MaxPromptBytes(m.Desc) }

func CheckPromptBytes(m *task.Model, field string, n int) error {
	return Convert(task.CheckPromptBytes(m.Desc, field, n))
}

func Tokenize(m *task.Model, text string, addBOS bool) ([]engine.Token, error) {
	return Result(task.Tokenize(m, text, addBOS))
}

func MaxTokens(field string, n *int, ctxSize int) (int, error) {
	return Result(task.MaxTokens(field, n, ctxSize))
}

func Sampling(m *task.Model, f task.SamplingFields) (engine.Sampling, error) {
	return Result(task.Sampling(m, f))
}

// SamplingDefaults are m's (task.Model.Defaults), found as it loaded.
func SamplingDefaults(m *task.Model) (topK int32, topP, minP float32) {
	d := m.Defaults()
	return d.TopK, d.TopP, d.MinP
}

func PenaltyWindow(field string, n *int, def int32, ctxSize int) (int32, error) {
	return Result(task.PenaltyWindow(field, n, def, ctxSize))
}

func CheckBias(m *task.Model, field string, bias []engine.LogitBias) error {
	return Convert(task.CheckBias(m.Desc, field, bias))
}

func CheckStops(field string, stops []string, maxCount int) error {
	return Convert(task.CheckStops(field, stops, maxCount))
}

// FIMPrompt is the request core's FIM prompt (task.FIMPrompt).
func FIMPrompt(m *task.Model, r fim.Request, maxTokens int) ([]engine.Token, fim.Info, error) {
	toks, info, err := task.FIMPrompt(m, r, maxTokens)
	return toks, info, Convert(err)
}

// GrammarFor is task.GrammarFor for the completion routes, which read
// their structured-output fields with StructuredFields.
func GrammarFor(m *task.Model, c task.Constraint, prompt []engine.Token, templated bool) (*engine.GrammarSpec, error) {
	return Result(task.GrammarFor(m, c, prompt, templated))
}

// StartJob submits gs as the choices of one request (task.Start); part
// names one of them in a panic's log and answer (task.Request.Part).
func StartJob(ctx context.Context, m *task.Model, part string, gs []*task.Request, collect bool) (*task.Job, error) {
	req := &task.Request{Choices: make([]*task.Spec, len(gs)), Collect: collect, Part: part}
	for i, g := range gs {
		req.Choices[i] = &g.Spec
	}
	return Result(task.Start(ctx, m, req))
}

// StartOne submits req, a request of one choice, to run on the caller's
// goroutine (task.Request.Part empty): a panic in it is the handler's or
// the stream writer's to recover, as for any one answer.
func StartOne(ctx context.Context, m *task.Model, req *task.Request, collect bool) (*task.Job, error) {
	req.Collect = collect
	return Result(task.Start(ctx, m, req))
}

// RunJob runs a started job to its end (task.Job.Run); the sink hears
// failures as Errors.
func RunJob(ctx context.Context, job *task.Job, sink task.SinkFuncs) ([]task.Turn, error) {
	if failed := sink.OnFailed; failed != nil {
		sink.OnFailed = func(err error) { failed(Convert(err)) }
	}
	return Result(job.Run(ctx, sink))
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

// FollowOneRaw runs a job of one raw generation to its end; emit, when not
// nil, hears each delta.
func FollowOneRaw(ctx context.Context, job *task.Job, emit func(d *task.Delta) error) (task.Outcome, error) {
	out, err := FollowOne(ctx, job, func(_ []reply.Event, d *task.Delta) error {
		if emit == nil {
			return nil
		}
		return emit(d)
	})
	return out.Outcome, err
}

// Recovered takes in a panic caught on a goroutine serving a request (see
// task.Recovered); the request ends with the 500 returned.
func Recovered(where string, v any) *Error { return FromTask(task.Recovered(where, v)) }

// FanOut is task.FanOut with its errors as Errors.
func FanOut(what string, n int, part func(i int) error, ended func(err error)) []error {
	var end func(error)
	if ended != nil {
		end = func(err error) { ended(Convert(err)) }
	}
	errs := task.FanOut(what, n, part, end)
	for i := range errs {
		errs[i] = Convert(errs[i])
	}
	return errs
}

// TurnClass is the class a chat turn runs in: the X-Superfluid-Class
// header when sent, else task.ChatClass's rule (a turn with tools is an
// agent's), else the server's default.
func TurnClass(ctx *fasthttp.RequestCtx, h Host, t *task.Chat) (sched.Class, error) {
	return task.ChatClass(t, ClassSent(ctx), func() (sched.Class, error) { return h.Class(ctx, "") })
}
