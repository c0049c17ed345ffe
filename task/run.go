package task

import (
	"cmp"
	"context"
	"errors"
	"sync/atomic"

	"superfluid/reply"
	"superfluid/sched"
)

// Request is one request of any API in the core's terms: the generation
// its choices share (a chat turn's with its plan applied, ChatPlan.Apply)
// and how many choices to make of it, or the choices themselves when they
// differ by more than a seed (a completion API's list of prompts).
type Request struct {
	// Spec is what every choice shares.
	Spec
	// Chat, when set, is a chat turn: Plan renders it and sets its plan on
	// Spec (ChatPlan.Apply), unless the API planned it already (Spec.Reply
	// set) because it needed the prompt first — to count it, or to bound
	// max tokens by it — or to refuse a bad turn before its other fields.
	Chat *Chat
	// N is how many choices to make of Spec (0 counts as one), each
	// sampling with its own seed (Spec.WithSeed) so that they differ.
	N int
	// Choices, when set by the API, are the choices as they are; else
	// Plan makes them of Spec and N.
	Choices []*Spec
	// Collect keeps each raw choice's text in its Outcome, for an answer
	// given whole; a streamed answer has it from the deltas. A chat turn's
	// reply is always collected (Turn).
	Collect bool
	// Part is what one choice is called where a panic in it is logged and
	// answered ("internal error in the choice"). Empty, a request of one
	// choice runs on Run's caller's goroutine, and a panic in it is the
	// caller's to recover (an API whose answer is one reply).
	Part string
}

// Sink hears what a request's choices make visible, for an API to render.
// A choice's calls come in order from one goroutine; different choices'
// calls may interleave. An error returned by Delta or Ended (the client is
// gone) fails that choice.
type Sink interface {
	// Delta is text (and tokens) choice i made visible; for a chat turn,
	// evs are the reply events it completed, and the turn's end brings a
	// last call with the parser's final events and a nil d.
	Delta(i int, evs []reply.Event, d *Delta) error
	// Ended is choice i run to its end; Ended may amend t (an API's own
	// reading of the outcome) or fail it.
	Ended(i int, t *Turn) error
	// Failed hears each choice's failure as it happens, before the other
	// choices are cancelled (a stream ends with its error event here).
	Failed(err error)
}

// EndChoice, returned by a Sink's Delta, ends that choice there because
// a rule of the API's own ended it (llama.cpp's n_indent and
// t_max_predict_ms): its generation is cancelled and Ended hears the
// outcome so far. It is not a failure; the other choices run on.
var EndChoice = errors.New("task: the choice was ended by its API's own rule")

// Job is a request whose every choice the scheduler accepted.
type Job struct {
	m       *Model
	req     *Request
	streams []*sched.Stream
	// superseded: the FIM gate cancelled it for the same client's newer
	// completion before any choice started; Run answers so.
	superseded atomic.Bool
}

// Start submits every choice of req with the one rollback (SubmitAll). A
// handler starts a job before it starts a streamed response, so that a
// refusal is still answered with a status. Every request of the FIM class
// passes the model's FIMGate here first, whichever API sent it: it
// supersedes the client's waiting one and may be shed (Throttled).
func Start(ctx context.Context, m *Model, req *Request) (j *Job, err error) {
	choices, err := Plan(m, req)
	if err != nil {
		return nil, err
	}
	fim := m.FIMGate != nil && isFIM(choices)
	if fim {
		client := clientOf(ctx)
		m.FIMGate.supersede(client)
		if err := m.FIMGate.admit(); err != nil {
			return nil, err
		}
		defer func() {
			if err == nil {
				m.FIMGate.track(client, j)
			}
		}()
	}
	sts, err := SubmitAll(ctx, m, choices)
	if err != nil {
		return nil, err
	}
	return &Job{m: m, req: req, streams: sts}, nil
}

// Plan makes req's choices, once: the API's own when it set them; else
// its chat turn rendered, tokenized and checked into Spec (PlanChat) when
// it has one not yet planned, and N of Spec, choice i with
// Spec.WithSeed(i). Start calls it.
func Plan(m *Model, req *Request) ([]*Spec, error) {
	if req.Choices != nil {
		return req.Choices, nil
	}
	if req.Chat != nil && req.Reply == nil {
		p, err := PlanChat(m, req.Chat)
		if err != nil {
			return nil, err
		}
		p.Apply(&req.Spec)
	}
	req.Choices = make([]*Spec, max(req.N, 1))
	for i := range req.Choices {
		s := req.Spec.WithSeed(i)
		req.Choices[i] = &s
	}
	return req.Choices, nil
}

// Cancel cancels every choice: the job will not be run (or no longer
// needs to be).
func (j *Job) Cancel() {
	for _, st := range j.streams {
		st.Cancel()
	}
}

// CancelChoice cancels choice i alone (a clock of the API's own ran out);
// Run still calls its Ended with the outcome so far.
func (j *Job) CancelChoice(i int) { j.streams[i].Cancel() }

// Run follows every choice at once to its end — a raw completion through
// the stop matcher (Follow), a chat turn also through its reply parser
// (FollowTurn) — telling sink what each makes visible. The first choice
// to fail cancels the others, since the answer is the failure; its error
// is returned. A panic in a choice fails it (FanOut), not the process.
func (j *Job) Run(ctx context.Context, sink Sink) ([]Turn, error) {
	turns := make([]Turn, len(j.streams))
	follow := func(i int) error {
		s, st := j.req.Choices[i], j.streams[i]
		var err error
		if s.Reply != nil {
			turns[i], err = FollowTurn(ctx, j.m, s, st, func(evs []reply.Event, d *Delta) error { return sink.Delta(i, evs, d) })
		} else {
			turns[i].Outcome, err = Follow(ctx, j.m, s, st, j.req.Collect, func(d *Delta) error { return sink.Delta(i, nil, d) })
		}
		if errors.Is(err, EndChoice) {
			<-st.Done() // Follow cancelled it: its result is final once done
			turns[i].Result, err = st.Result(), nil
		}
		if err == nil && j.superseded.Load() && turns[i].Completed == 0 && errors.Is(turns[i].Result.Err, sched.ErrCancelled) {
			err = errSuperseded
		}
		if err != nil {
			return err
		}
		return sink.Ended(i, &turns[i])
	}
	if j.req.Part == "" && len(j.streams) == 1 {
		if err := follow(0); err != nil {
			sink.Failed(err)
			return turns, err
		}
		return turns, nil
	}
	part := cmp.Or(j.req.Part, "choice")
	errs := FanOut(part, len(j.streams), follow, func(err error) {
		sink.Failed(err)
		j.Cancel()
	})
	for _, err := range errs {
		if err != nil {
			return turns, err
		}
	}
	return turns, nil
}

// Run is Start and Job.Run in one call, for an answer given whole.
func Run(ctx context.Context, m *Model, req *Request, sink Sink) ([]Turn, error) {
	j, err := Start(ctx, m, req)
	if err != nil {
		return nil, err
	}
	return j.Run(ctx, sink)
}

// SinkFuncs is a Sink of functions, any of them nil to ignore what it hears.
type SinkFuncs struct {
	OnDelta  func(i int, evs []reply.Event, d *Delta) error
	OnEnded  func(i int, t *Turn) error
	OnFailed func(err error)
}

func (f SinkFuncs) Delta(i int, evs []reply.Event, d *Delta) error {
	if f.OnDelta == nil {
		return nil
	}
	return f.OnDelta(i, evs, d)
}

func (f SinkFuncs) Ended(i int, t *Turn) error {
	if f.OnEnded == nil {
		return nil
	}
	return f.OnEnded(i, t)
}

func (f SinkFuncs) Failed(err error) {
	if f.OnFailed != nil {
		f.OnFailed(err)
	}
}
