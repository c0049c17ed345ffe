package sched

import (
	"time"

	"superfluid/engine"
)

// Learning rates: each step's Timings say how long its llama_decode took
// and what it carried. The planner keeps the time of a decode-only step,
// smoothed (new samples weigh 0.3), for the short-reply hold, and the cost
// of a prefill step's rows by their depth (rowCost, cost.go), learnt at the
// step sizes the planner runs, for the join-wait budget; and it owes decode
// a share of every prefill step's time.

const rateWeight = 0.3

func smooth(old, sample float64) float64 {
	if old <= 0 {
		return sample
	}
	return (1-rateWeight)*old + rateWeight*sample
}

// learn takes in a step's timings. stepTime is how long the Tick call took,
// for an engine that reports no step time.
func (p *planner) learn(t *engine.Timings, stepTime time.Duration) {
	secs := float64(t.StepNS) / 1e9
	if t.StepNS <= 0 {
		secs = stepTime.Seconds()
	}
	if secs <= 0 {
		return
	}
	if t.PrefillTokens == 0 {
		if t.DecodeTokens > 0 {
			p.decodeStepSecs = smooth(p.decodeStepSecs, plausibleDecodeSecs(p.decodeStepSecs, secs))
			p.decodeOwed = max(0, p.decodeOwed-secs)
		}
		return
	}
	// Decode is owed a share of what the step plausibly took: one stall
	// (or a hostile timing) must not hold prefill back for hours.
	p.decodeOwed += decodeShare(p.stepInteractiveDecode) * p.prefillCost.plausible(p.stepRows, p.stepDepth, secs)
	// A step's rows cost about the same each at one depth, prompt or
	// decode; a small step's fixed cost would overstate the rate, so it
	// takes a step at least rateMinTokens big (or half the batch, on a
	// smaller one).
	if int(t.PrefillTokens) >= min(rateMinTokens, p.batch/2) {
		p.prefillCost.observe(p.stepRows, p.stepDepth, secs)
	}
}

// plausibleDecodeSecs is a decode-only step's measured time as the learnt
// step time takes it: at most decodeStallFactor times the time learnt so
// far. The short-reply holds judge a reply by its tokens left times this
// time, and on a loaded machine one step may stall for a second: learnt
// whole, it made a 32-token FIM reply look many seconds long, released the
// holds, and background prefill then joined every step of the reply
// (fim-under-load measured 13.9 s instead of 0.7 s). A lasting change
// (more lanes decoding) is still learnt, over a few steps.
func plausibleDecodeSecs(learnt, secs float64) float64 {
	if learnt <= 0 {
		return secs
	}
	return min(secs, decodeStallFactor*learnt)
}

const decodeStallFactor = 1.5

// rateMinTokens: a prefill step of fewer prompt tokens is not learnt from
// (unless the batch is smaller than twice this).
const rateMinTokens = 64

// planShape is the rows pl puts into the step and the sum of their
// positions: a prompt chunk's tokens sit at its Offset onwards, a decoding
// lane's token at the end of its sequence.
func (p *planner) planShape(pl *engine.Plan) (rows int, depthSum float64) {
	for i := range pl.Prefills {
		off, n := float64(pl.Prefills[i].Offset), float64(pl.Prefills[i].Count)
		rows += int(pl.Prefills[i].Count)
		depthSum += n*off + n*(n-1)/2
	}
	for i := range pl.Decodes {
		rows++
		if l := p.find(pl.Decodes[i].Lane); l != nil {
			depthSum += float64(l.npast)
		}
	}
	return rows, depthSum
}
