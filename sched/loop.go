package sched

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"superfluid/engine"
	"superfluid/panics"
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

	retire engine.Plan // retire-only plans, reused
	// ended is told of every job whose stream has its result.
	ended func(*job)
	// grammars is the engine's grammar compiler; nil if it has none.
	grammars engine.Grammars
	// restorer is the cache's off-goroutine restore, nil if it has none;
	// wake tells the runner a restore's read has ended.
	restorer RestoringCache
	wake     func()

	// turn is the engine's place at the arbiter (Config.Arbiter), nil if
	// it steps alone; turnErr is why an acquire failed (the runner stops).
	turn    *Turn
	turnErr error
	// intake takes in what was submitted since the step began (the
	// runner's inbox); nil in tests that submit to the loop directly.
	intake func()
}

func newLoop(eng engine.Engine, cache Cache, cfg Config, stats *counters) *loop {
	l := &loop{eng: eng, cache: cache, clock: cfg.Clock, stats: stats, p: newPlanner(cfg, eng.Descriptor(), stats)}
	l.grammars, _ = eng.(engine.Grammars)
	l.restorer, _ = cache.(RestoringCache)
	l.p.cacheNS.useCache(cache, eng.Descriptor().LoRAIdentity)
	if cfg.Arbiter != nil {
		l.turn = cfg.Arbiter
		l.p.elsewhere = cfg.Arbiter.others
	}
	return l
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
		l.stats.observeTTFT(j.class, at.Sub(j.submitted))
	} else {
		l.stats.observeITL(j.class, at.Sub(j.lastToken))
	}
	j.lastToken = at
	if j.obs != nil && j.prefilling {
		j.obs.Decoding(at)
	}
	j.prefilling = false
	if j.stream != nil {
		j.stream.push(t)
	}
}

// submit queues a job. Its deadline is checked as each step is planned,
// so it ends within a step of it, queued (never to start) or running.
func (l *loop) submit(j *job) {
	now := l.clock.Now()
	l.p.enqueue(j, now)
	l.p.publishOccupancy()
}

// step runs one scheduling step: end what was cancelled or expired,
// preempt for waiting Chat/FIM requests, admit, plan one engine step, run
// it, take in its events, retire what finished. A plan the engine refuses is planned again
// without what it blamed (see tickRefused). Under an arbiter, a step that
// decodes runs in the engine's turn (stepInTurn). It reports whether work
// remains.
func (l *loop) step(ctx context.Context) bool {
	now := l.clock.Now()
	l.prepare(now)
	if l.turn != nil {
		return l.stepInTurn(ctx, now)
	}
	return l.tickStep(now)
}

// prepare readies the step's lanes: ends what was cancelled or expired,
// imports finished restores, preempts for waiting Chat/FIM requests and
// admits.
func (l *loop) prepare(now time.Time) {
	p := l.p
	p.sweep(now)
	l.finishRestores(now)
	p.preemptForPressure()
	p.preemptForQueued()
	l.admit(now)
	l.flush()
}

// tickStep plans and runs the engine step, planning again after a plan the
// engine refused.
func (l *loop) tickStep(now time.Time) bool {
	p := l.p
	for {
		pl := p.buildPlan(now)
		p.publishOccupancy()
		if pl.Empty() && len(p.rowChunks) == 0 {
			// Lanes waiting only on restores: the runner waits for a
			// reader's word instead of spinning.
			return !p.idle() && !p.onlyRestoring()
		}
		start := l.clock.Now()
		ev, err := l.tick(pl)
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

// ran takes in a step that ran (err nil) or failed on a full KV cache.
func (l *loop) ran(ev *engine.Events, err error, start, end time.Time) {
	p := l.p
	if err == nil {
		l.countStep(ev, start, end)
	}
	p.advance(ev, end.Sub(start), end)
	if err == nil {
		l.prefillRows(end)
	} else {
		p.rowChunks = p.rowChunks[:0]
	}
	l.deliver(ev, end)
	if err != nil {
		l.kvFull(err, end)
	}
	p.sweep(end) // cancels and deadlines that came during the step
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
		acquiredFrom := l.clock.Now()
		seq, cached, ready, err := l.acquire(j)
		var pe *panics.Error
		if errors.As(err, &pe) { // the cache failed on this prompt: it would again
			p.endJob(j, FinishError, fmt.Errorf("sched: no engine sequence for the request: %w", err), now)
			continue
		}
		if err != nil {
			p.acquireFailed(j, err, now)
			continue
		}
		if err := p.admit(j, seq, cached, now); err != nil {
			l.giveBack(p.releaseOf(j, seq, j.prompt[:max(0, min(cached, len(j.prompt)))]))
			continue
		}
		if ready != nil {
			ln := p.laneOf(j)
			ln.restoring, ln.restoreReady = true, ready
		}
		if j.obs != nil {
			l.observeAdmission(j, acquiredFrom, cached, ready != nil)
		}
		if j.cancelled() {
			if ln := p.laneOf(j); ln != nil {
				p.finishLane(ln, FinishCancelled, nil, now)
			}
		}
	}
	p.dropUnstarted()
}

// acquire asks the cache for j's sequence; ready is non-nil when the cache
// is restoring its warm prefix from disk (raised when the read has ended).
// A panic in the cache is a *panics.Error.
func (l *loop) acquire(j *job) (seq int32, cached int, ready *atomic.Bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			seq, cached, ready, err = -1, 0, nil, panics.Recovered(panics.Scheduler, v, "in", "cache acquire", "prompt_tokens", len(j.prompt))
		}
	}()
	key := j.prompt
	if !j.adapters.none() {
		// The set's own namespace of the cache; cold when none is left
		// (namespaces.go).
		k, ok := l.p.cacheKey(j)
		if !ok {
			seq, cached, err = l.cache.Acquire(j.prompt[:1]) // one token leaves nothing to seed
			return seq, cached, nil, err
		}
		key = k
	}
	if l.restorer == nil {
		seq, cached, err = l.cache.Acquire(key)
		return seq, cached, nil, err
	}
	flag := new(atomic.Bool)
	wake := l.wake
	seq, cached, restoring, err := l.restorer.AcquireRestoring(key, func() {
		flag.Store(true)
		if wake != nil {
			wake()
		}
	})
	if !restoring {
		flag = nil
	}
	return seq, cached, flag, err
}

// finishRestores imports the restores whose reads have ended: each lane
// starts from what was restored, or cold if the restore failed.
func (l *loop) finishRestores(now time.Time) {
	for _, ln := range l.p.lanes {
		if ln.restoring && !ln.finishing && ln.restoreReady.Load() {
			got := l.restorer.FinishRestore(ln.seq)
			l.p.restored(ln, got)
			if o := ln.job.obs; o != nil {
				o.Restored(now, got)
			}
		}
	}
}

// tick runs a plan on the engine. A panic in the engine is an error that
// blames no lane: tickRefused then takes admissions back half at a time
// until the one at fault fails alone, or fails the running lanes — as it
// does for an engine error it cannot pin on a lane.
func (l *loop) tick(pl *engine.Plan) (ev *engine.Events, err error) {
	defer func() {
		if v := recover(); v != nil {
			ev, err = nil, panics.Recovered(panics.Scheduler, v, "in", "engine tick",
				"admits", len(pl.Admits), "decodes", len(pl.Decodes), "retires", len(pl.Retires))
		}
	}()
	return l.eng.Tick(pl)
}

// deliver hands the step's tokens to their streams.
func (l *loop) deliver(ev *engine.Events, end time.Time) {
	r := &l.p.ready
	for _, rt := range r.tokens {
		l.push(rt.job, ev, &ev.Tokens[rt.ev], end)
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
		if rel.obs == nil {
			l.giveBack(rel)
			continue
		}
		start := l.clock.Now()
		l.giveBack(rel)
		parked := false
		if tr, ok := l.cache.(TierReporter); ok && len(rel.tokens) > 0 {
			parked = tr.LastReleaseParked()
		}
		rel.obs.Published(start, l.clock.Now(), len(rel.tokens), parked)
	}
	for _, j := range r.done {
		// A stream of the job's released from now on (its lane retires
		// in a later step) is published only if the namespace still names
		// its set (giveBack).
		l.p.cacheNS.release(j.cacheNS)
		l.releaseGrammar(j)
		l.endMedia(j)
		l.stats.completed.Add(1)
		l.stats.observeGeneration(j)
		if j.obs != nil {
			j.obs.Ended(j.ended, j.result())
		}
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
		DraftTokens: j.draftTokens, DraftAccepted: j.draftAccepted,
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

// retireFinished retires, at once, the lanes this step finished or
// preempted, so their sequences go back to the cache now. A retire the
// engine refuses for one lane drops that lane alone (the engine does not
// hold it) and the others retire.
func (l *loop) retireFinished(end time.Time) {
	for {
		l.p.retirePlan(&l.retire)
		if len(l.retire.Retires) == 0 {
			return
		}
		_, err := l.tick(&l.retire)
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

// kvFull handles a step the KV pool had no room for: the cache evicts, and
// the next step tries again. When nothing is left to evict, the worst lane
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
		_, _ = l.tick(&l.retire) // ErrUnknownLane: the engine never had it
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
		if _, err := l.tick(&l.retire); err != nil {
			l.abandonLanes(ErrClosed, now)
		} else {
			p.retired(l.retire.Retires)
		}
	}
	l.flush()
	p.publishOccupancy()
}

// giveBack returns a released sequence to the cache; a discarded one
// (an adapter lane's stream with no cache namespace) is emptied first.
func (l *loop) giveBack(rel release) {
	if rel.ns >= 0 && !l.p.cacheNS.names(rel.ns, rel.set) {
		rel.discard, rel.tokens = true, nil
	}
	if rel.discard {
		if err := l.eng.Free(rel.seq); err != nil {
			l.p.cfg.Logger.Error("sched: emptying an adapter lane's sequence failed", "seq", rel.seq, "err", err)
		}
	}
	l.cache.Release(rel.seq, rel.tokens)
	if rel.park {
		l.parkReleased(rel.tokens)
	}
}
