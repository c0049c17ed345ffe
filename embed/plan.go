package embed

import (
	"context"

	"superfluid/engine"
	"superfluid/sched"
)

// job is one request's inputs on their way through the runner. The
// runner's goroutine owns everything but done and the fields set before
// the job is queued.
type job struct {
	ctx    context.Context
	inputs [][]engine.Token
	class  sched.Class

	vecs []float32 // len(inputs) × dim, filled as calls return
	next int       // the first input not yet given to a call
	left int       // inputs whose vectors have not come back
	err  error
	done chan struct{} // closed once vecs or err is final
}

// part is one job's inputs [from, to) in a call.
type part struct {
	j        *job
	from, to int
}

// call is what one engine call embeds: parts of jobs of one class.
type call struct {
	class  sched.Class
	empty  bool // nothing to run
	parts  []part
	inputs int
	tokens int
}

// plan picks the next call from the queued jobs: the best class waiting
// (lowest number), its jobs in arrival order, as many whole inputs as fit
// maxInputs and maxTokens. Inputs of one job stay in order, and a job's
// inputs may span calls. Jobs the caller already dropped are not in
// queue. It decides only; the caller runs the call and then advances the
// jobs (take).
func plan(queue []*job, maxInputs, maxTokens int) call {
	best, found := sched.Class(0), false
	for _, j := range queue {
		if j.next < len(j.inputs) && (!found || j.class < best) {
			best, found = j.class, true
		}
	}
	c := call{class: best, empty: !found}
	if !found {
		return c
	}
	for _, j := range queue {
		if j.class != best || j.next >= len(j.inputs) {
			continue
		}
		from, to := j.next, j.next
		for to < len(j.inputs) && c.inputs < maxInputs && c.tokens+len(j.inputs[to]) <= maxTokens {
			c.inputs++
			c.tokens += len(j.inputs[to])
			to++
		}
		if to > from {
			c.parts = append(c.parts, part{j: j, from: from, to: to})
		}
		if c.inputs == maxInputs || to < len(j.inputs) {
			break // full: the next input does not fit
		}
	}
	return c
}

// batch flattens a call's inputs for the engine, reusing dst.
func (c *call) batch(dst [][]engine.Token) [][]engine.Token {
	dst = dst[:0]
	for _, p := range c.parts {
		dst = append(dst, p.j.inputs[p.from:p.to]...)
	}
	return dst
}
