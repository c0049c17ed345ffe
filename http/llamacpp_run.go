package http

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
)

// errRunStop ends a run from inside its delta callback: one of llama.cpp's
// line rules (n_indent, t_max_predict_ms) ended the completion.
var errRunStop = task.EndChoice

// A run waits for its first token, then generates — unless
// t_max_prompt_ms runs out first.
const (
	phaseWaiting int32 = iota
	phaseGenerating
	phasePromptExpired
)

// llamaRun follows one submitted llamaJob and keeps what llama.cpp's
// server reports of a finished slot.
type llamaRun struct {
	job   *llamaJob
	p     *llamaParams
	all   *task.Job // the request's runs, this one at index
	index int
	guard lineGuard

	phase        atomic.Int32
	predictCut   atomic.Bool // the hard bound of t_max_predict_ms cancelled the run
	promptTimer  *time.Timer
	predictTimer *time.Timer // set and stopped by the goroutine in wait
	firstToken   time.Time

	content   []byte
	tokens    []engine.Token
	probs     []llamaProb
	seen      int // tokens with text, so far
	predicted int // tokens generated, end-of-generation included
	stopType  string
	stopWord  string
	truncated bool
	timeCut   bool // ended by the clock: not reproducible
	fromCache bool // answered by the completion cache; no work done
	result    sched.Result
}

// startRuns submits every job before any is followed (task.Start), so
// that a refusal (a full queue) gets a status code and cancels the rest.
func startRuns(ctx context.Context, m *Model, jobs []*llamaJob, p *llamaParams) ([]*llamaRun, error) {
	specs := make([]*task.Request, len(jobs))
	for i, j := range jobs {
		specs[i] = j.spec
	}
	all, err := wire.StartJob(ctx, &m.Model, "run", specs, false)
	if err != nil {
		return nil, err
	}
	runs := make([]*llamaRun, len(jobs))
	for i, j := range jobs {
		r := &llamaRun{job: j, p: p, all: all, index: i, guard: lineGuard{nIndent: p.nIndent}, truncated: j.truncated}
		if p.maxPrompt > 0 && !p.warmup {
			r.promptTimer = time.AfterFunc(p.maxPrompt, r.expirePrompt)
		}
		runs[i] = r
	}
	return runs, nil
}

// followRuns follows runs at once to their ends (task.Job.Run); onText,
// when not nil, receives each run's visible text as it comes and ended
// each finished run (streaming). A failed run cancels the others, since
// the response is the failure; failed hears it first.
func followRuns(ctx context.Context, m *Model, runs []*llamaRun, onText func(r *llamaRun, text []byte, toks []task.TokenOut) error,
	ended func(r *llamaRun) error, failed func(error)) error {
	if len(runs) == 0 {
		return nil
	}
	defer func() {
		for _, r := range runs {
			r.stopTimers() // a run that failed: its timers must not outlive the response
		}
	}()
	_, err := wire.RunJob(ctx, runs[0].all, task.SinkFuncs{
		OnDelta: func(i int, _ []reply.Event, d *task.Delta) error {
			r := runs[i]
			var emit func([]byte, []task.TokenOut) error
			if onText != nil {
				emit = func(text []byte, toks []task.TokenOut) error { return onText(r, text, toks) }
			}
			return r.take(m, &r.guard, d, emit)
		},
		OnEnded: func(i int, t *task.Turn) error {
			r := runs[i]
			if err := r.end(ctx, t.Outcome); err != nil {
				return err
			}
			if ended != nil {
				return ended(r)
			}
			return nil
		},
		OnFailed: failed,
	})
	return err
}

// waitRuns follows runs at once to their ends (whole responses).
func waitRuns(ctx context.Context, m *Model, runs []*llamaRun) error {
	return followRuns(ctx, m, runs, nil, nil, nil)
}

// expirePrompt is t_max_prompt_ms running out: a run still without a token
// is cancelled (what it prefilled stays in the prefix cache).
func (r *llamaRun) expirePrompt() {
	if r.phase.CompareAndSwap(phaseWaiting, phasePromptExpired) {
		r.all.CancelChoice(r.index)
	}
}

// cutPredict is the hard bound of t_max_predict_ms.
func (r *llamaRun) cutPredict() {
	r.predictCut.Store(true)
	r.all.CancelChoice(r.index)
}

func (r *llamaRun) stopTimers() {
	if r.promptTimer != nil {
		r.promptTimer.Stop()
	}
	if r.predictTimer != nil {
		r.predictTimer.Stop()
	}
}

// end takes in how the run's generation ended (the stop matcher's outcome,
// its result final) and concludes it in llama.cpp's terms.
func (r *llamaRun) end(ctx context.Context, out task.Outcome) error {
	r.stopTimers() // the run has ended: a timer firing now would mislabel it
	r.predicted = out.Completed
	r.stopWord = out.StopWord
	r.result = out.Result
	return r.conclude(ctx)
}

// take handles one delta: starts the predict clock at the first token,
// applies the line rules, keeps text, ids and probabilities.
func (r *llamaRun) take(m *Model, g *lineGuard, d *task.Delta, onText func([]byte, []task.TokenOut) error) error {
	if r.p.warmup {
		return nil
	}
	now := time.Now()
	if len(d.Tokens) > 0 && r.firstToken.IsZero() {
		if !r.phase.CompareAndSwap(phaseWaiting, phaseGenerating) {
			return errRunStop // t_max_prompt_ms ran out as the first token came
		}
		r.firstToken = now
		if r.p.maxPredict > 0 {
			r.predictTimer = time.AfterFunc(2*r.p.maxPredict, r.cutPredict)
		}
	}
	overtime := r.p.maxPredict > 0 && !r.firstToken.IsZero() && now.Sub(r.firstToken) > r.p.maxPredict
	text, stop := g.push(d.Text, overtime)
	r.content = append(r.content, text...)
	r.seen += len(d.Tokens)
	r.record(m, d.Tokens)
	if onText != nil {
		if err := onText(text, d.Tokens); err != nil {
			return err
		}
	}
	if stop != "" {
		r.stopType, r.timeCut = "limit", stop == guardTime
		return errRunStop
	}
	return nil
}

// record keeps the ids and probabilities a request asked for.
func (r *llamaRun) record(m *Model, toks []task.TokenOut) {
	for i := range toks {
		if r.p.wantTokens {
			r.tokens = append(r.tokens, toks[i].ID)
		}
		if r.p.nProbs > 0 {
			r.probs = append(r.probs, llamaProbOf(m, &toks[i], r.p.nProbs))
		}
	}
}

// conclude names how the run ended in llama.cpp's terms.
func (r *llamaRun) conclude(ctx context.Context) error {
	res := r.result
	switch {
	case r.p.warmup:
		r.stopType, r.predicted = "limit", 0
	case r.phase.Load() == phasePromptExpired:
		r.stopType, r.predicted, r.seen = "limit", 0, 0
		r.content, r.tokens, r.probs = r.content[:0], r.tokens[:0], r.probs[:0]
	case r.stopType != "": // a line rule
	case r.predictCut.Load() && res.Finish == sched.FinishCancelled:
		r.stopType, r.timeCut = "limit", true
	case r.stopWord != "":
		r.stopType = "word"
	case res.Finish == sched.FinishEOG || res.Finish == sched.FinishStop || res.Finish == sched.FinishGrammar:
		// A complete grammar leaves only the end of generation to sample.
		r.stopType = "eos"
	case res.Finish == sched.FinishLength:
		r.stopType = "limit"
	case res.Finish == sched.FinishContext:
		r.stopType, r.truncated = "limit", true
	case errors.Is(res.Err, sched.ErrClosed):
		return wire.Unavailable("the server is shutting down")
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		r.stopType = "none"
	}
	return nil
}

// reproducible reports whether the same request would end the same way
// (greedy decoding aside): not when the clock or a cancellation ended it.
func (r *llamaRun) reproducible() bool {
	return r.stopType != "" && r.stopType != "none" && !r.timeCut && !r.predictCut.Load() &&
		r.phase.Load() != phasePromptExpired
}

// llamaProbOf is a token's completion_probabilities entry.
func llamaProbOf(m *Model, t *task.TokenOut, n int) llamaProb {
	p := llamaProb{ID: t.ID, Token: wire.ValidText(t.Piece), Bytes: wire.ByteList(t.Piece), Logprob: wire.FiniteLogprob(t.Logprob), TopLogprobs: []llamaAlt{}}
	task.EachTop(&m.Model, t, n, func(tok engine.Token, piece []byte, logprob float32) {
		p.TopLogprobs = append(p.TopLogprobs, llamaAlt{ID: tok, Token: wire.ValidText(piece), Bytes: wire.ByteList(piece), Logprob: wire.FiniteLogprob(logprob)})
	})
	return p
}
