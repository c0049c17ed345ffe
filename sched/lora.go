package sched

import (
	"encoding/binary"
	"math"
)

// LoRA adapters. llama.cpp applies adapters to a whole context, not to a
// sequence: every row of one llama_decode runs under the same adapter set.
// So a request names its set (Request.LoRA: one scale per adapter the
// engine loaded), and each step runs the lanes of one set only — the set
// of the most deserving lane with work, by the rule below — while the
// others wait the step out, counting it (lane.setWait). llama-server
// batches the same way (only slots with the same adapters share a batch).
//
// A stream computed under an adapter set differs from the base model's
// at every layer an adapter touches, so the prefix cache keys it in its
// set's namespace (namespaces.go): a prefix computed under one set never
// serves another, a set's next turn starts warm, and its streams park and
// restore after a restart with the same adapters and scales.

// adapterSet is one request's LoRA scales and the key steps compare.
type adapterSet struct {
	scales []float32 // nil: no adapter (every scale zero)
	key    string    // the scales' bits; "" for none
}

// newAdapterSet canonicalizes scales: all zero is no adapter (llama.cpp
// leaves a zero-scale adapter out), whatever its length.
func newAdapterSet(scales []float32) adapterSet {
	for _, s := range scales {
		if s != 0 {
			b := make([]byte, 4*len(scales))
			for i, s := range scales {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(s))
			}
			return adapterSet{scales: append([]float32(nil), scales...), key: string(b)}
		}
	}
	return adapterSet{}
}

// none reports whether the set applies no adapter.
func (a adapterSet) none() bool { return a.key == "" }

// stepAdapters picks the adapter set of the next step among the lanes
// with work in it (decoders and prompts waiting), as a pure rule:
//
//  1. a lane whose set has waited StarvationSteps steps first — the
//     longest waiting, so that every set gets its turn;
//  2. else the best class;
//  3. within it the lane whose set waited more steps, so that two sets of
//     one class alternate step by step;
//  4. then the older lane.
//
// With every lane in one set (the usual case, and always when the engine
// loaded no adapter) that set is the answer.
func stepAdapters(lanes []*lane, bound int) adapterSet {
	var best *lane
	bestWait := 0
	for _, l := range lanes {
		if !l.hasStepWork() {
			continue
		}
		w := l.setWait
		if best == nil {
			best, bestWait = l, w
			continue
		}
		if stepRankBefore(l, w, best, bestWait, bound) {
			best, bestWait = l, w
		}
	}
	if best == nil {
		return adapterSet{}
	}
	return best.job.adapters
}

// stepRankBefore orders two lanes for stepAdapters; wa and wb are their
// waits.
func stepRankBefore(a *lane, wa int, b *lane, wb int, bound int) bool {
	as, bs := wa >= bound, wb >= bound
	switch {
	case as != bs:
		return as
	case as && wa != wb:
		return wa > wb
	case a.job.class != b.job.class:
		return a.job.class < b.job.class
	case wa != wb:
		return wa > wb
	}
	return a.tag < b.tag
}

// hasStepWork reports whether the lane would put rows into a step: a
// prompt left to prefill, or a token to decode.
func (l *lane) hasStepWork() bool {
	if l.finishing || l.restoring {
		return false
	}
	return l.remaining() > 0 || l.admitted && l.decoding() && l.toGenerate() != 0
}

// onlyStepAdapters picks the step's adapter set (p.stepSet) and keeps the
// decoders under it; the lanes of other sets with work count the wait.
func (p *planner) onlyStepAdapters(decoders []*lane) []*lane {
	p.stepSet = adapterSet{}
	if p.adapters == 0 {
		return decoders
	}
	p.stepSet = stepAdapters(p.lanes, p.cfg.StarvationSteps)
	for _, l := range p.lanes {
		switch {
		case l.job.adapters.key == p.stepSet.key:
			l.setWait = 0
		case l.hasStepWork():
			l.setWait++
		}
	}
	kept := decoders[:0]
	for _, l := range decoders {
		if l.job.adapters.key == p.stepSet.key {
			kept = append(kept, l)
		}
	}
	return kept
}
