package sched

// Preemption: with every lane busy and a Chat or FIM request waiting, the
// worst lane of a worse class gives its lane up. A decoding lane goes
// first (its prompt is in the cache once it retires, so it resumes warm),
// else one still prefilling (its prefilled part is cached the same way);
// among those, the worst class, then the youngest lane. The lane retires in
// the next plan (the engine retires before it admits, so its slot is free
// for the waiting request in that same tick), its sequence is released to
// the cache with everything it holds, and its job goes back to the head of
// its queue carrying its prompt plus every token generated so far as its
// new prompt and its remaining token limit. Tokens already delivered are
// not delivered again, so with greedy sampling the client sees exactly the
// output an unpreempted run would have produced.

// preemptForQueued preempts lanes for the waiting Chat and FIM requests a
// lane would admit (their class under its cap), one lane per request.
func (p *planner) preemptForQueued() {
	free := p.cfg.Lanes - p.liveLanes()
	var perClass [NumClasses]int
	for _, l := range p.lanes {
		if !l.finishing {
			perClass[l.job.class]++
		}
	}
	for c := Chat; c <= FIM; c++ {
		waiting := len(p.queues[c])
		for waiting > 0 && perClass[c] < p.classCap(c) {
			waiting--
			perClass[c]++
			if free > 0 {
				free-- // admitted without a preemption
				continue
			}
			v := p.victim(c)
			if v == nil {
				return
			}
			p.preempt(v)
			perClass[v.job.class]--
			p.reservedInteractive++
		}
	}
}

// victim is the lane to preempt for a request of class want, or nil.
func (p *planner) victim(want Class) *lane {
	pick := func(decoding bool) *lane {
		var v *lane
		for _, l := range p.lanes {
			if !l.admitted || l.finishing || l.job.class <= want || l.decoding() != decoding {
				continue
			}
			if v == nil || l.job.class > v.job.class || (l.job.class == v.job.class && l.tag > v.tag) {
				v = l
			}
		}
		return v
	}
	if v := pick(true); v != nil {
		return v
	}
	return pick(false)
}

// preempt marks l to retire in the next plan and its job to be requeued.
func (p *planner) preempt(l *lane) {
	l.preempted = true
	l.finishing = true
	l.job.preemptions++
	p.stats.preemptions.Add(1)
	if o := l.job.obs; o != nil {
		o.Preempted(p.cfg.Clock.Now())
	}
}

// kvVictim is the lane to give up when the KV pool is full and the cache
// has nothing left to evict: the worst class, then the one holding the
// most tokens.
func (p *planner) kvVictim() *lane {
	var v *lane
	for _, l := range p.lanes {
		if !l.admitted || l.finishing {
			continue
		}
		if v == nil || l.job.class > v.job.class || (l.job.class == v.job.class && l.npast > v.npast) {
			v = l
		}
	}
	return v
}

// requeuePreempted turns a retired preempted lane back into a queued job:
// its prompt becomes everything it held plus its last token, its limit
// what is left of it.
func (p *planner) requeuePreempted(l *lane) {
	j := l.job
	j.prompt = l.tokens[:len(l.tokens):len(l.tokens)]
	if j.maxTokens > 0 {
		j.maxTokens -= l.produced
	}
	j.resumed = true
	p.requeueFront(j)
}
