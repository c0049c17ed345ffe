package sched

import (
	"time"

	"superfluid/engine"
)

// Learning rates: each step's Timings say how long its llama_decode took
// and what it carried. The planner keeps smoothed rates (new samples weigh
// 0.3): the time of a decode-only step (for the short-reply hold) and of a
// prompt token in a prefill step (for the join-wait budget), both measured
// at the step sizes the planner runs; and it owes decode a share of every
// prefill step's time.

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
			p.decodeStepSecs = smooth(p.decodeStepSecs, secs)
			p.decodeOwed = max(0, p.decodeOwed-secs)
		}
		return
	}
	p.decodeOwed += decodeShare(p.stepInteractiveDecode) * secs
	// A step's rows cost about the same each, prompt or decode; a small
	// step's fixed cost would overstate the rate, so it takes a step at
	// least rateMinTokens big (or half the batch, on a smaller one).
	if int(t.PrefillTokens) >= min(rateMinTokens, p.batch/2) {
		p.prefillSPT = smooth(p.prefillSPT, secs/float64(t.PrefillTokens+t.DecodeTokens))
	}
}

// rateMinTokens: a prefill step of fewer prompt tokens is not learnt from
// (unless the batch is smaller than twice this).
const rateMinTokens = 64
