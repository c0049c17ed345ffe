package sched

import (
	"fmt"
	"slices"
	"time"

	"superfluid/engine"
)

// Admission: which queued job gets a free lane next.
//
// Each class has a FIFO queue. A free lane goes to the head with the best
// effective class: a job's class improves one level for every
// StarvationSteps engine steps it has waited, so background work always gets a
// turn. A class at its ClassLanes cap is skipped. Lanes a preemption freed
// for a waiting Chat or FIM request go to such a request, not to an aged
// worse one. Admission is two-phase: the planner picks a job, the runner
// asks the Cache for a sequence holding its longest cached prefix, and the
// planner binds the job to a lane on it.

const (
	// sharedPrefixMinTokens: a queued request waits for a lane that will
	// publish a prefix it shares only when the share is at least this long.
	sharedPrefixMinTokens = 1024
	// sharedPrefixTailTokens: the lane must be this close to its end.
	sharedPrefixTailTokens = 64
	// sharedPrefixMaxHoldSteps: never hold a request longer than this many
	// engine steps: the lane puts at most one token into each, so four
	// times its tail, against throttled or passed-over steps.
	sharedPrefixMaxHoldSteps = 4 * sharedPrefixTailTokens
)

// enqueue queues a new job at the back of its class. A job Submit stamped
// keeps its time: it waited for the step in flight since.
func (p *planner) enqueue(j *job, now time.Time) {
	if j.submitted.IsZero() {
		j.submitted = now
	}
	j.queuedStep = p.steps
	p.queues[j.class] = append(p.queues[j.class], j)
}

// requeueFront puts a job back at the head of its class: a preempted lane's
// job, or one whose admission could not get a sequence.
func (p *planner) requeueFront(j *job) {
	q := append(p.queues[j.class], nil)
	copy(q[1:], q)
	q[0] = j
	p.queues[j.class] = q
}

// queued is how many jobs wait.
func (p *planner) queued() int {
	n := 0
	for _, q := range p.queues {
		n += len(q)
	}
	return n
}

// beginAdmissions starts a tick's admission round.
func (p *planner) beginAdmissions() {
	p.heldSkip = [NumClasses]int{}
	p.admitBlocked = false
}

// nextAdmission pops the job the next free lane should take, or nil: no
// lane is free, nothing is admissible, or admission is blocked this tick.
func (p *planner) nextAdmission(now time.Time) *job {
	for !p.admitBlocked && !p.kvBackoff && p.liveLanes() < p.cfg.Lanes {
		c, ok := p.admissibleClass()
		if !ok {
			return nil
		}
		i := p.heldSkip[c]
		j := p.queues[c][i]
		if p.awaitsSharedPrefix(j) {
			p.heldSkip[c]++
			p.stats.sharedPrefixHolds.Add(1)
			continue
		}
		p.queues[c] = append(p.queues[c][:i], p.queues[c][i+1:]...)
		if j.cancelled() || j.expired(now) {
			p.failQueued(j, now)
			continue
		}
		if p.reservedInteractive > 0 && j.class.interactive() {
			p.reservedInteractive--
		}
		return j
	}
	return nil
}

// admissibleClass is the class whose head the next lane should take.
func (p *planner) admissibleClass() (Class, bool) {
	var perClass [NumClasses]int
	for _, l := range p.lanes {
		if !l.finishing {
			perClass[l.job.class]++
		}
	}
	best, bestEff, found := Class(0), 0, false
	for c := range Class(NumClasses) {
		if p.heldSkip[c] >= len(p.queues[c]) || perClass[c] >= p.classCap(c) {
			continue
		}
		if p.reservedInteractive > 0 && !c.interactive() {
			continue
		}
		if !p.admitsUnderPressure(c) {
			continue
		}
		head := p.queues[c][p.heldSkip[c]]
		aged := min(int(p.steps-head.queuedStep)/p.cfg.StarvationSteps, int(c))
		eff := int(c) - aged
		if !found || eff < bestEff {
			best, bestEff, found = c, eff, true
		}
	}
	if !found && p.reservedInteractive > 0 {
		// The requests the preemption was for left (cancelled): free
		// lanes go to anyone.
		p.reservedInteractive = 0
		return p.admissibleClass()
	}
	return best, found
}

// classCap is how many lanes class c may hold.
func (p *planner) classCap(c Class) int {
	if n := p.cfg.ClassLanes[c]; n > 0 {
		return n
	}
	return p.cfg.Lanes
}

// awaitsSharedPrefix reports whether j should wait for a lane that shares
// at least sharedPrefixMinTokens of its prompt and publishes them to the
// cache shortly (its lane ends within sharedPrefixTailTokens, or this
// step), instead of prefilling the shared part a second time. Only agent
// and background requests wait, and never past sharedPrefixMaxHoldSteps.
// The lane must hold more of the prefix than the cache held when it
// started, or waiting gains nothing.
func (p *planner) awaitsSharedPrefix(j *job) bool {
	if j.resumed || j.class.interactive() || p.steps-j.queuedStep >= sharedPrefixMaxHoldSteps || !j.adapters.none() {
		return false
	}
	for _, l := range p.lanes {
		if l.preempted || !l.job.adapters.none() {
			continue
		}
		if left := l.toGenerate(); !l.finishing && (left < 0 || left > sharedPrefixTailTokens) {
			continue
		}
		shared := commonPrefix(j.prompt, l.tokens)
		if shared >= sharedPrefixMinTokens && shared > l.warm {
			return true
		}
	}
	return false
}

func commonPrefix(a, b []engine.Token) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// admit binds j to a new lane on seq, which holds the first cached tokens
// of its prompt. It refuses a cached count the engine would refuse: the
// runner then gives the sequence back and j has failed.
func (p *planner) admit(j *job, seq int32, cached int, now time.Time) error {
	if cached < 0 || cached >= len(j.prompt) {
		err := fmt.Errorf("sched: the cache seeded %d tokens of a %d-token prompt (need fewer)", cached, len(j.prompt))
		p.endJob(j, FinishError, err, now)
		return err
	}
	p.nextTag++
	l := &lane{tag: p.nextTag, job: j, seq: seq, warm: cached, prefilled: cached, npast: cached, slot: p.freeSlot(), gate: p.spec.gate.start()}
	grow := 256
	if j.maxTokens > 0 {
		grow = min(j.maxTokens, grow)
	}
	l.tokens = make([]engine.Token, len(j.prompt), len(j.prompt)+grow)
	copy(l.tokens, j.prompt)
	if !j.admitted {
		l.firstAdmission = true
		j.admitted = true
		j.admittedAt = now
		if j.stream != nil {
			j.stream.started.Store(true)
		}
		j.cached = cached
	}
	j.prefilling = true
	p.countWarmth(cached)
	p.stats.admissions.Add(1)
	p.lanes = append(p.lanes, l)
	return nil
}

// freeSlot is the lowest slot no running lane holds: a lane keeps its
// row in a status view while others come and go.
func (p *planner) freeSlot() int {
	for slot := 0; ; slot++ {
		held := false
		for _, l := range p.lanes {
			if l.slot == slot && !l.finishing {
				held = true
				break
			}
		}
		if !held {
			return slot
		}
	}
}

func (p *planner) countWarmth(cached int) {
	if cached > 0 {
		p.stats.warmPrefixTokens.Add(uint64(cached))
	} else {
		p.stats.coldAdmissions.Add(1)
	}
}

// restored takes in a restore's end: the lane's sequence holds cached
// tokens of its prompt (0: the restore failed and it prefills cold), and
// it joins the plans. The cold admission counted at bind is taken back
// when the restore is warm.
func (p *planner) restored(l *lane, cached int) {
	l.restoring, l.restoreReady = false, nil
	cached = max(0, min(cached, len(l.job.prompt)-1))
	l.warm, l.prefilled, l.npast = cached, cached, cached
	if l.firstAdmission {
		l.job.cached = cached
	}
	if cached > 0 {
		p.stats.coldAdmissions.Add(^uint64(0))
		p.stats.warmPrefixTokens.Add(uint64(cached))
	}
}

// onlyRestoring reports whether every live lane is restoring: nothing can
// step until a read ends.
func (p *planner) onlyRestoring() bool {
	restoring := false
	for _, l := range p.lanes {
		if !l.finishing && !l.restoring {
			return false
		}
		restoring = restoring || l.restoring
	}
	return restoring
}

// unbind takes back a lane the engine never took (its admit was refused):
// its sequence goes back to the cache holding what it held when acquired.
func (p *planner) unbind(l *lane) {
	if i := slices.Index(p.lanes, l); i >= 0 {
		p.lanes = slices.Delete(p.lanes, i, i+1)
	}
	rel := p.releaseOf(l.job, l.seq, l.tokens[:l.warm:l.warm])
	rel.obs = l.job.obs
	p.ready.releases = append(p.ready.releases, rel)
}

// acquireFailed handles a job the cache found no sequence for: it waits at
// the head of its queue while lanes run (one will free a sequence), and
// fails when none does.
func (p *planner) acquireFailed(j *job, err error, now time.Time) {
	if p.liveLanes() > 0 {
		p.requeueFront(j)
		p.admitBlocked = true
		p.stats.admitsDeferred.Add(1)
		return
	}
	p.endJob(j, FinishError, fmt.Errorf("sched: no engine sequence for the request: %w", err), now)
}

// failQueued ends a job that is leaving the queue without running.
func (p *planner) failQueued(j *job, now time.Time) {
	switch {
	case j.cancelled():
		p.endJob(j, FinishCancelled, ErrCancelled, now)
	case j.expired(now):
		p.stats.expired.Add(1)
		p.endJob(j, FinishDeadline, ErrDeadline, now)
	}
}
