package http

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"superfluid/engine"
	"superfluid/sched"
)

// errRunStop ends a run from inside its delta callback: one of llama.cpp's
// line rules (n_indent, t_max_predict_ms) ended the completion.
var errRunStop = errors.New("http: completion ended by a llama.cpp limit")

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
	job *llamaJob
	p   *llamaParams
	st  *sched.Stream

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

// startRuns submits every job before any is followed (task.SubmitAll), so
// that a refusal (a full queue) gets a status code and cancels the rest.
func startRuns(ctx context.Context, m *Model, jobs []*llamaJob, p *llamaParams) ([]*llamaRun, error) {
	specs := make([]*genSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.spec
	}
	sts, err := submitAll(ctx, m, specs)
	if err != nil {
		return nil, err
	}
	runs := make([]*llamaRun, len(jobs))
	for i, j := range jobs {
		r := &llamaRun{job: j, p: p, st: sts[i], truncated: j.truncated}
		if p.maxPrompt > 0 && !p.warmup {
			r.promptTimer = time.AfterFunc(p.maxPrompt, r.expirePrompt)
		}
		runs[i] = r
	}
	return runs, nil
}

// waitRuns follows runs at once to their ends (whole responses); a failed
// run cancels the others, since the response is the failure.
func waitRuns(ctx context.Context, m *Model, runs []*llamaRun) error {
	errs := fanOut("run", len(runs), func(i int) error {
		return runs[i].wait(ctx, m, nil)
	}, func(error) {
		for _, r := range runs {
			r.st.Cancel()
		}
	})
	return errors.Join(errs...)
}

// expirePrompt is t_max_prompt_ms running out: a run still without a token
// is cancelled (what it prefilled stays in the prefix cache).
func (r *llamaRun) expirePrompt() {
	if r.phase.CompareAndSwap(phaseWaiting, phasePromptExpired) {
		r.st.Cancel()
	}
}

// cutPredict is the hard bound of t_max_predict_ms.
func (r *llamaRun) cutPredict() {
	r.predictCut.Store(true)
	r.st.Cancel()
}

func (r *llamaRun) stopTimers() {
	if r.promptTimer != nil {
		r.promptTimer.Stop()
	}
	if r.predictTimer != nil {
		r.predictTimer.Stop()
	}
}

// wait follows the run to its end. onText, when not nil, receives each
// piece of visible text with the tokens behind it (streaming); its error —
// the client is gone — cancels the run and is returned.
func (r *llamaRun) wait(ctx context.Context, m *Model, onText func(text []byte, toks []tokenOut) error) error {
	guard := lineGuard{nIndent: r.p.nIndent}
	out, err := follow(ctx, m, r.job.spec, r.st, false, func(d *delta) error {
		return r.take(m, &guard, d, onText)
	})
	r.stopTimers() // the run has ended: a timer firing now would mislabel it
	r.predicted = out.Completed
	if err != nil && !errors.Is(err, errRunStop) {
		return err
	}
	if err == nil {
		r.stopWord = out.StopWord
	}
	<-r.st.Done()
	r.result = r.st.Result()
	return r.conclude(ctx)
}

// take handles one delta: starts the predict clock at the first token,
// applies the line rules, keeps text, ids and probabilities.
func (r *llamaRun) take(m *Model, g *lineGuard, d *delta, onText func([]byte, []tokenOut) error) error {
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
func (r *llamaRun) record(m *Model, toks []tokenOut) {
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
		return unavailable("the server is shutting down")
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
func llamaProbOf(m *Model, t *tokenOut, n int) llamaProb {
	p := llamaProb{ID: t.ID, Token: validText(t.Piece), Bytes: byteList(t.Piece), Logprob: finiteLogprob(t.Logprob), TopLogprobs: []llamaAlt{}}
	var piece []byte
	for _, alt := range t.Top[:min(len(t.Top), n)] {
		piece = m.Text.AppendPiece(piece[:0], alt.Token, false)
		p.TopLogprobs = append(p.TopLogprobs, llamaAlt{ID: alt.Token, Token: validText(piece), Bytes: byteList(piece), Logprob: finiteLogprob(alt.Logprob)})
	}
	return p
}

// validText is a token's text without the bytes of a split character, as
// llama.cpp shows it; "bytes" carries them all.
func validText(b []byte) string { return strings.ToValidUTF8(string(b), "") }
