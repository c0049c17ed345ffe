package sched

import (
	"time"

	"superfluid/engine"
)

// Learning rates: each tick's Timings say how long its prefill step and its
// decode-only steps took. The planner keeps smoothed rates (new samples
// weigh 0.3) and sizes later ticks from them: the prefill budget so that
// prefill takes its share of TickTarget, the open-tick budget, and the
// decode rounds that fill a tick.

const rateWeight = 0.3

func smooth(old, sample float64) float64 {
	if old <= 0 {
		return sample
	}
	return (1-rateWeight)*old + rateWeight*sample
}

// learn updates the rates from a tick's timings.
func (p *planner) learn(t *engine.Timings, tickTime time.Duration) {
	prefilled := int(t.PrefillTokens)
	decodeSteps := int(t.Steps)
	if prefilled > 0 && decodeSteps > 0 {
		decodeSteps-- // the first step carried the prompt tokens
	}
	switch {
	case decodeSteps > 0 && t.DecodeNS > 0:
		p.roundSecs = smooth(p.roundSecs, float64(t.DecodeNS)/1e9/float64(decodeSteps))
	case prefilled == 0 && decodeSteps > 0 && tickTime > 0:
		// An engine that reports no split: the whole tick was decode.
		p.roundSecs = smooth(p.roundSecs, tickTime.Seconds()/float64(decodeSteps))
	}
	if prefilled == 0 {
		return
	}
	prefillSecs := max(float64(t.PrefillNS)/1e9, 1e-3)
	if prefilled >= prefillRateMinTokens {
		sample := prefillSecs / float64(prefilled)
		p.prefillSPT = smooth(p.prefillSPT, sample)
		if prefilled >= bulkRateMinTokens {
			p.prefillSPTLast = sample
			p.prefillRateSamples++
			p.prefillSPTBulk = smooth(p.prefillSPTBulk, sample)
		}
	}
	if p.prefillFixed {
		return
	}
	// What the whole planned prefill would have taken at the rate of what
	// ran (a tick stopped by a full KV pool ran less), against the share of
	// the tick target the prefilling lanes are due.
	planned := max(p.tickPrefillTokens, prefilled)
	secs := prefillSecs * float64(planned) / float64(prefilled)
	lanes := float64(max(p.tickPrefillLanes, 1))
	share := lanes / (lanes + float64(p.tickDecodeLanes))
	factor := clampF(p.cfg.TickTarget.Seconds()*share/secs, 0.5, 2)
	p.prefillBudget = int(clampF(float64(p.prefillBudget)*factor, minAdaptivePrefillBudget, maxPrefillBudget))
}
