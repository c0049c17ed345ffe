package sched

import (
	"fmt"
	"time"

	"superfluid/engine"
)

// advance takes in what the step of p.plan did: the engine applied the
// plan's retires and admits, sampled tokens, and reports where each lane it
// touched stands. It is called for a step that ran (err nil) or one that
// failed on engine.ErrKVFull (retires and admits applied, the step not):
// the events say what did happen either way. stepTime is how long the
// Tick call took; end is when it returned.
func (p *planner) advance(ev *engine.Events, stepTime time.Duration, end time.Time) {
	pl := &p.plan
	for i := range pl.Admits {
		if l := p.find(pl.Admits[i].Lane); l != nil {
			l.admitted = true
		}
	}
	for i := range ev.Tokens {
		p.onToken(ev, i, end)
	}
	for i := range ev.Lanes {
		le := &ev.Lanes[i]
		l := p.find(le.Lane)
		if l == nil {
			continue
		}
		l.prefilled, l.npast = int(le.Prefilled), int(le.NPast)
		if le.Finish != engine.FinishNone {
			p.finishLane(l, finishOf(le.Finish), laneFault(le.Finish, le.Status), end)
		}
	}
	p.stats.prefillTokens.Add(uint64(ev.Timings.PrefillTokens))
	p.stats.grammarFastTokens.Add(uint64(ev.Timings.GrammarFast))
	p.stats.grammarMaskedTokens.Add(uint64(ev.Timings.GrammarMasked))
	p.learnSpec(&ev.Timings, stepSecs(&ev.Timings, stepTime), len(ev.Tokens) > 0)
	p.learn(&ev.Timings, stepTime)
	p.retired(pl.Retires)
}

// onToken takes in one sampled token.
func (p *planner) onToken(ev *engine.Events, i int, end time.Time) {
	te := &ev.Tokens[i]
	l := p.find(te.Lane)
	if l == nil {
		return
	}
	// The sequence will hold it (the last one excepted) whether or not
	// anyone sees it: tokens must stay what Release is told.
	l.tokens = append(l.tokens, te.Token)
	l.produced++
	p.onDraftToken(l, te.Token)
	if l.finishing {
		return // stopped, cancelled or past its deadline: not delivered
	}
	j := l.job
	if j.cancelled() {
		p.finishLane(l, FinishCancelled, nil, end)
		return
	}
	j.generated++
	p.stats.decodeTokens.Add(1)
	p.ready.tokens = append(p.ready.tokens, readyToken{job: j, ev: i})
	switch {
	case te.Finish == engine.FinishError:
		// The lane event, read after the tokens, carries the status.
	case te.Finish != engine.FinishNone:
		p.finishLane(l, finishOf(te.Finish), laneFault(te.Finish, engine.StatusOK), end)
	case j.isStop(te.Token):
		p.finishLane(l, FinishStop, nil, end)
	}
}

// laneFault is the error of a lane the engine ended with FinishError (a
// C++ exception mid-step, say), nil for any other finish.
func laneFault(f engine.Finish, st engine.Status) error {
	if f != engine.FinishError {
		return nil
	}
	if st == engine.StatusOK {
		st = engine.StatusException
	}
	return fmt.Errorf("sched: the engine failed this request mid-step: %w", &engine.Error{Status: st, Op: "tick"})
}

// retired drops the lanes a step retired: the engine no longer holds them.
func (p *planner) retired(tags []uint32) {
	if len(tags) == 0 {
		return
	}
	p.dropLanes(func(l *lane) bool {
		for _, t := range tags {
			if t == l.tag {
				return true
			}
		}
		return false
	})
}

// retirePlan fills pl with a retire of every finished lane the engine
// still holds: the runner carries it out right after the step that
// finished them, so their sequences reach the cache before their clients
// hear they are done (and send the next turn).
func (p *planner) retirePlan(pl *engine.Plan) {
	pl.Reset()
	for _, l := range p.lanes {
		if l.finishing && l.admitted {
			pl.Retires = append(pl.Retires, l.tag)
		}
	}
}
