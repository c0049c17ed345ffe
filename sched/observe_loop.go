package sched

import (
	"time"

	"superfluid/engine"
)

// observeAdmission tells j's observer of the admission just made: the
// cache was asked from `from` until now.
func (l *loop) observeAdmission(j *job, from time.Time, cached int, restoring bool) {
	a := Admission{Start: from, End: l.clock.Now(), Cached: cached, Restoring: restoring, Resumed: j.resumed}
	if tr, ok := l.cache.(TierReporter); ok {
		a.Tier = tr.LastAcquireTier()
	}
	j.obs.Admitted(a)
}

// countStep counts a step that ran, as llama-server counts its decodes:
// one llama_decode (n_decode), the lanes busy in it, the time of a step
// carrying prompt tokens (prompt seconds); and tells the observers of the
// lanes it prefilled.
func (l *loop) countStep(ev *engine.Events, start, end time.Time) {
	if ev == nil || ev.Timings.StepNS == 0 {
		return // retires and admits only: no llama_decode ran
	}
	p := l.p
	busy := 0
	for _, ln := range p.lanes {
		if !ln.restoring && !ln.finishing { // in the step (admits included)
			busy++
		}
	}
	l.stats.countDecode(busy, ev.Timings.PrefillTokens, end.Sub(start))
	pl := &p.plan
	for i := range pl.Prefills {
		pf := &pl.Prefills[i]
		if ln := p.find(pf.Lane); ln != nil && ln.job.obs != nil {
			ln.job.obs.Prefilled(start, end, int(pf.Count))
		}
	}
}
