package http

// The handlers' side of the request core (package task): its types under
// the names the handlers use, and its checks with their errors turned into
// apiErrors on the way back, so that every API words them as before. The
// API families call task through these until each moves into its own
// package and speaks task directly.

import (
	"context"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
)

type (
	delta          = task.Delta
	tokenOut       = task.TokenOut
	outcome        = task.Outcome
	samplingFields = task.SamplingFields
)

// genSpec is the llama.cpp routes' name for task.Request, whose choices
// they set themselves (startJob) until they move into their own package.
type genSpec = task.Request

const (
	maxStops            = task.MaxStops
	maxBiasEntries      = task.MaxBiasEntries
	promptBytesPerToken = task.PromptBytesPerToken
)

// core is m as the request core generates with it.
func (m *Model) core() *task.Model { return &m.Model }

// apiErr is err with a task error turned into the apiError every API
// renders; other errors pass as they are.
func apiErr(err error) error { return wire.Convert(err) }

func fromTask(te *task.Error) *apiError { return wire.FromTask(te) }

// errShutDown ends a generation the scheduler stopped because the server
// is shutting down (the drain period ran out before it finished).
var errShutDown = fromTask(task.ErrShutDown)

func checkPrompt(m *Model, prompt []engine.Token) error {
	return apiErr(task.CheckPrompt(m.Desc, prompt))
}

func maxPromptBytes(m *Model) int { return task.MaxPromptBytes(m.Desc) }

func checkPromptBytes(m *Model, field string, n int) error {
	return apiErr(task.CheckPromptBytes(m.Desc, field, n))
}

func tokenize(m *Model, text string, addBOS bool) ([]engine.Token, error) {
	toks, err := task.Tokenize(m.core(), text, addBOS)
	return toks, apiErr(err)
}

func maxTokens(field string, n *int, ctxSize int) (int, error) {
	v, err := task.MaxTokens(field, n, ctxSize)
	return v, apiErr(err)
}

func sampling(m *Model, f samplingFields) (engine.Sampling, error) {
	s, err := task.Sampling(m.core(), f)
	return s, apiErr(err)
}

// samplingDefaults are m's (task.Model.Defaults), found as it loaded.
func samplingDefaults(m *Model) (topK int32, topP, minP float32) {
	d := m.Defaults()
	return d.TopK, d.TopP, d.MinP
}

func penaltyWindow(field string, n *int, def int32, ctxSize int) (int32, error) {
	v, err := task.PenaltyWindow(field, n, def, ctxSize)
	return v, apiErr(err)
}

func checkBias(m *Model, field string, bias []engine.LogitBias) error {
	return apiErr(task.CheckBias(m.Desc, field, bias))
}

func checkStops(field string, stops []string, maxCount int) error {
	return apiErr(task.CheckStops(field, stops, maxCount))
}

func keepHead(s string, n int) string { return task.KeepHead(s, n) }

func finishName(f sched.Finish) string { return task.FinishName(f) }

// startJob submits gs as the choices of one request (task.Start); part
// names one of them in a panic's log and answer (task.Request.Part).
func startJob(ctx context.Context, m *Model, part string, gs []*genSpec, collect bool) (*task.Job, error) {
	req := &task.Request{Choices: make([]*task.Spec, len(gs)), Collect: collect, Part: part}
	for i, g := range gs {
		req.Choices[i] = &g.Spec
	}
	return apiResult(task.Start(ctx, m.core(), req))
}

// runJob runs a started job to its end (task.Job.Run); the sink hears
// failures as apiErrors.
func runJob(ctx context.Context, job *task.Job, sink task.SinkFuncs) ([]task.Turn, error) {
	if failed := sink.OnFailed; failed != nil {
		sink.OnFailed = func(err error) { failed(apiErr(err)) }
	}
	turns, err := job.Run(ctx, sink)
	return turns, apiErr(err)
}

// startOne submits req, a request of one choice, to run on the caller's
// goroutine (task.Request.Part empty): a panic in it is the handler's or
// the stream writer's to recover, as for any one answer.
func startOne(ctx context.Context, m *Model, req *task.Request, collect bool) (*task.Job, error) {
	req.Collect = collect
	return apiResult(task.Start(ctx, m.core(), req))
}

// followOne runs a job of one chat turn to its end; emit, when not nil,
// hears each delta with the reply events it completed (task.Sink.Delta).
func followOne(ctx context.Context, job *task.Job, emit func(evs []reply.Event, d *delta) error) (turnOut, error) {
	turns, err := runJob(ctx, job, task.SinkFuncs{OnDelta: func(_ int, evs []reply.Event, d *delta) error {
		if emit == nil {
			return nil
		}
		return emit(evs, d)
	}})
	if len(turns) == 0 {
		return turnOut{}, err
	}
	return turnOutOf(turns[0]), err
}

// followOneRaw runs a job of one raw generation to its end; emit, when not
// nil, hears each delta.
func followOneRaw(ctx context.Context, job *task.Job, emit func(d *delta) error) (outcome, error) {
	out, err := followOne(ctx, job, func(_ []reply.Event, d *delta) error {
		if emit == nil {
			return nil
		}
		return emit(d)
	})
	return out.outcome, err
}

// turnOutOf is a core turn under the handlers' name for it.
func turnOutOf(t task.Turn) turnOut {
	return turnOut{outcome: t.Outcome, Reasoning: t.Reasoning, Content: t.Content, Calls: t.Calls}
}

// recovered takes in a panic caught on a goroutine serving a request (see
// task.Recovered); the request ends with the 500 returned.
func recovered(where string, v any) *apiError { return fromTask(task.Recovered(where, v)) }

// fanOut is task.FanOut with its errors as apiErrors.
func fanOut(what string, n int, part func(i int) error, ended func(err error)) []error {
	var end func(error)
	if ended != nil {
		end = func(err error) { ended(apiErr(err)) }
	}
	errs := task.FanOut(what, n, part, end)
	for i := range errs {
		errs[i] = apiErr(errs[i])
	}
	return errs
}

// grammarFor is task.GrammarFor for the completion routes, which read
// their structured-output fields in wire (wire.StructuredFields).
func grammarFor(m *Model, c task.Constraint, prompt []engine.Token, templated bool) (*engine.GrammarSpec, error) {
	g, err := task.GrammarFor(m.core(), c, prompt, templated)
	return g, apiErr(err)
}

// apiResult is a task call's result with its error as an apiError, for
// the handlers that call task directly: apiResult(task.PlanChat(…)).
func apiResult[T any](v T, err error) (T, error) { return v, apiErr(err) }
