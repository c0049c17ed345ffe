package sched

import (
	"errors"
	"fmt"
	"time"

	"superfluid/engine"
)

// loop does what the planner decides: it asks the cache for sequences,
// runs plans on the engine, delivers tokens and results to streams and
// gives sequences back. One goroutine owns it; the Scheduler's runner in
// production, the test itself in the scheduling tests, which step it in
// virtual time.
type loop struct {
	eng   engine.Engine
	cache Cache
	clock Clock
	p     *planner
	stats *counters

	retire engine.Plan // retire-only ticks, reused
	// ended is told of every job whose stream has its result.
	ended func(*job)
	// seen is how many of the running tick's token events onStep has
	// looked at.
	seen int
	// grammars is the engine's grammar compiler; nil if it has none.
	grammars engine.Grammars
}

func newLoop(eng engine.Engine, cache Cache, cfg Config, stats *counters) *loop {
	l := &loop{eng: eng, cache: cache, clock: cfg.Clock, stats: stats, p: newPlanner(cfg, eng.Descriptor(), stats)}
	if sr, ok := eng.(engine.StepReporter); ok {
		sr.SetStepHook(l.onStep)
	}
	l.grammars, _ = eng.(engine.Grammars)
	return l
}

// onStep hands the tokens a running tick has sampled so far to their
// streams, so a reader sees each token when it is sampled rather than when
// a multi-second tick ends. It applies the rules advance applies at the
// tick's end — nothing after a stop token, nothing for a finishing or
// cancelled job — and marks what it delivered so that deliver skips it.
func (l *loop) onStep(ev *engine.Events) {
	p := l.p
	now := l.clock.Now()
	for i := l.seen; i < len(ev.Tokens); i++ {
		te := &ev.Tokens[i]
		ln := p.find(te.Lane)
		if ln == nil || ln.finishing || ln.stoppedEarly || ln.job.cancelled() {
			continue
		}
		p.markEarly(i)
		l.push(ln.job, ev, te, now)
		if ln.job.isStop(te.Token) {
			ln.stoppedEarly = true
		}
	}
	l.seen = len(ev.Tokens)
}

// push hands one token to its job's stream.
func (l *loop) push(j *job, ev *engine.Events, te *engine.TokenEvent, at time.Time) {
	t := Token{Token: te.Token}
	if j.logprobs > 0 {
		t.Logprob = te.Logprob
		t.Top = append([]engine.TopLogprob(nil), ev.TopOf(te)...)
	}
	if j.firstToken.IsZero() {
		j.firstToken = at
		l.stats.observeTTFT(at.Sub(j.submitted))
	}
	if j.stream != nil {
		j.stream.push(t)
	}
}

// submit queues a job. A deadline arms a timer that cuts the tick in
// flight short when it passes, so the job ends within a step of it,
// queued (never to start) or running.
func (l *loop) submit(j *job) {
	now := l.clock.Now()
	if !j.deadline.IsZero() && j.timer == nil {
		j.timer = l.clock.AfterFunc(j.deadline.Sub(now), l.eng.Yield)
	}
	l.p.enqueue(j, now)
	l.p.publishOccupancy()
}

// step runs one scheduling step: end what was cancelled or expired,
// preempt for waiting Chat/FIM requests, admit, plan, tick, take in the
// events, retire what finished. A plan the engine refuses is planned again
// without what it blamed (see tickRefused). It reports whether work
// remains.
func (l *loop) step() bool {
	p := l.p
	now := l.clock.Now()
	p.sweep(now)
	p.preemptForQueued()
	l.admit(now)
	l.flush()
	for {
		pl := p.buildPlan(now)
		p.publishOccupancy()
		if pl.Empty() {
			return !p.idle()
		}
		start := l.clock.Now()
		l.seen = 0
		p.beginTick()
		ev, err := l.eng.Tick(pl)
		end := l.clock.Now()
		if err != nil && !errors.Is(err, engine.ErrKVFull) {
			replan := l.tickRefused(pl, ev, err, start, end)
			l.flush()
			if replan {
				now = end
				continue
			}
			p.publishOccupancy()
			return !p.idle()
		}
		l.ran(ev, err, start, end)
		return !p.idle()
	}
}

// ran takes in a tick that ran (err nil) or stopped on a full KV cache.
func (l *loop) ran(ev *engine.Events, err error, start, end time.Time) {
	p := l.p
	p.advance(ev, end.Sub(start), end)
	l.deliver(ev, end)
	if err != nil {
		l.kvFull(err, end)
	}
	p.sweep(end) // cancels and deadlines that cut this tick short
	l.retireFinished(end)
	l.flush()
	p.publishOccupancy()
}

// admit binds queued jobs to free lanes, each on a sequence from the cache.
func (l *loop) admit(now time.Time) {
	p := l.p
	p.beginAdmissions()
	for {
		j := p.nextAdmission(now)
		if j == nil {
			break
		}
		seq, cached, err := l.cache.Acquire(j.prompt)
		if err != nil {
			p.acquireFailed(j, err, now)
			continue
		}
		if err := p.admit(j, seq, cached, now); err != nil {
			l.cache.Release(seq, j.prompt[:max(0, min(cached, len(j.prompt)))])
			continue
		}
		l.started(j, now)
	}
	p.dropUnstarted()
}

// started arms Cancel to stop the job's lane within a step: it yields the
// tick once running is raised. Running is raised before the cancelled flag
// is read again, so a Cancel either sees it and yields, or is seen here.
func (l *loop) started(j *job, now time.Time) {
	st := j.stream
	if st == nil {
		return
	}
	st.running.Store(true)
	if j.cancelled() {
		if ln := l.p.laneOf(j); ln != nil {
			l.p.finishLane(ln, FinishCancelled, nil, now)
		}
	}
}

// deliver hands the tick's tokens to their streams, but those onStep
// delivered while the tick ran.
func (l *loop) deliver(ev *engine.Events, end time.Time) {
	r := &l.p.ready
	for _, rt := range r.tokens {
		if !l.p.wasEarly(rt.ev) {
			l.push(rt.job, ev, &ev.Tokens[rt.ev], end)
		}
	}
	clear(r.tokens)
	r.tokens = r.tokens[:0]
}

// flush gives released sequences back to the cache, then results to
// streams: a client that sends its next turn on hearing the result finds
// this one's tokens published.
func (l *loop) flush() {
	r := &l.p.ready
	for _, rel := range r.releases {
		l.cache.Release(rel.seq, rel.tokens)
	}
	for _, j := range r.done {
		if j.timer != nil {
			j.timer.Stop()
		}
		l.releaseGrammar(j)
		l.stats.completed.Add(1)
		if j.stream != nil {
			j.stream.finish(j.result())
		}
		if l.ended != nil {
			l.ended(j)
		}
	}
	r.clear()
}

// releaseGrammar drops an ended job's reference to its grammar. A lane of
// it the engine still holds keeps its own copy until it retires.
func (l *loop) releaseGrammar(j *job) {
	if j.grammar != 0 && l.grammars != nil {
		l.grammars.ReleaseGrammar(j.grammar)
	}
	j.grammar = 0
}

// result is what the job's stream reports.
func (j *job) result() Result {
	r := Result{
		Finish: j.finish, Err: j.err, PromptTokens: j.promptLen, CachedTokens: j.cached,
		Generated: j.generated, Preemptions: j.preemptions,
	}
	if !j.admitted {
		r.QueueWait = j.ended.Sub(j.submitted)
		return r
	}
	r.QueueWait = j.admittedAt.Sub(j.submitted)
	if j.firstToken.IsZero() {
		r.Prefill = j.ended.Sub(j.admittedAt)
		return r
	}
	r.TTFT = j.firstToken.Sub(j.submitted)
	r.Prefill = j.firstToken.Sub(j.admittedAt)
	r.Decode = j.ended.Sub(j.firstToken)
	return r
}

// retireFinished retires, at once, the lanes this tick finished or
// preempted, so their sequences go back to the cache now. A retire the
// engine refuses for one lane drops that lane alone (the engine does not
// hold it) and the others retire.
func (l *loop) retireFinished(end time.Time) {
	for {
		l.p.retirePlan(&l.retire)
		if len(l.retire.Retires) == 0 {
			return
		}
		_, err := l.eng.Tick(&l.retire)
		if err == nil {
			l.p.retired(l.retire.Retires)
			return
		}
		l.stats.tickErrors.Add(1)
		if ln := l.blamed(err); ln != nil {
			l.logTickError(&l.retire, err, "failed the lane at fault", ln)
			l.isolate(ln, err, end)
			continue
		}
		l.logTickError(&l.retire, err, "failed every lane", nil)
		l.abandonLanes(fmt.Errorf("sched: engine tick failed: %w", err), end)
		return
	}
}

// kvFull handles a tick the KV pool had no room for: the cache evicts, and
// the next tick tries again. When nothing is left to evict, the worst lane
// gives its room up: preempted (to resume when others have finished) while
// others run, failed when it is alone and still does not fit.
func (l *loop) kvFull(err error, end time.Time) {
	p := l.p
	l.stats.kvFull.Add(1)
	if l.cache.Relieve() {
		return
	}
	v := p.kvVictim()
	if v == nil {
		return
	}
	if p.liveLanes() <= 1 {
		p.finishLane(v, FinishError, fmt.Errorf("sched: the KV cache has no room for this request (%d tokens in its sequence) and nothing left to evict: %w", v.npast, err), end)
		return
	}
	p.preempt(v)
	p.kvBackoff = true
}

// abandonLanes ends every lane with err and takes them out of the engine
// one at a time, so that a lane the engine does not know stops none of the
// others.
func (l *loop) abandonLanes(err error, end time.Time) {
	p := l.p
	for _, ln := range p.lanes {
		if !ln.finishing || ln.preempted {
			p.finishLane(ln, FinishError, err, end)
		}
		l.retire.Reset()
		l.retire.Retires = append(l.retire.Retires, ln.tag)
		_, _ = l.eng.Tick(&l.retire) // ErrUnknownLane: the engine never had it
		_ = l.eng.Free(ln.seq)
		ln.npast = 0
	}
	p.dropLanes(func(*lane) bool { return true })
}

// close ends everything with ErrClosed: queued jobs fail, lanes retire
// (their sequences published as usual) and fail.
func (l *loop) close() {
	p := l.p
	now := l.clock.Now()
	for c := range p.queues {
		for _, j := range p.queues[c] {
			p.endJob(j, FinishError, ErrClosed, now)
		}
		clear(p.queues[c])
		p.queues[c] = p.queues[c][:0]
	}
	for _, ln := range p.lanes {
		if !ln.finishing || ln.preempted {
			p.finishLane(ln, FinishError, ErrClosed, now)
		}
	}
	p.dropUnstarted()
	p.retirePlan(&l.retire)
	if len(l.retire.Retires) > 0 {
		if _, err := l.eng.Tick(&l.retire); err != nil {
			l.abandonLanes(ErrClosed, now)
		} else {
			p.retired(l.retire.Retires)
		}
	}
	l.flush()
	p.publishOccupancy()
}
