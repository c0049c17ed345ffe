package sched

import (
	"encoding/binary"
	"math"

	"superfluid/engine"
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
// at every layer an adapter touches, so the prefix cache keys it by its
// set: each set that appears gets a namespace, numbered from 0, and its
// lanes' tokens reach the cache as -(1 + token + vocab × namespace) —
// negative, which no vocabulary's token is, one-to-one within a set and
// disjoint between sets and from the base model's streams. A prefix
// computed under one set therefore never serves another, and a set's next
// turn starts warm. The numbering is this process's: kv never parks such
// a stream (kv.processLocal), since another process may number another
// set the same. Past maxCacheNamespaces sets (or what int32 holds at this
// vocabulary) a new set's lanes run cold and their streams are discarded.

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

// maxCacheNamespaces bounds the adapter sets given a cache namespace in a
// process: scales are a request's choice, and each namespace stays
// numbered for the process's life.
const maxCacheNamespaces = 256

// cacheNamespaces numbers adapter sets for the prefix cache.
type cacheNamespaces struct {
	vocab int64
	max   int32
	ids   map[string]int32
}

func newCacheNamespaces(vocab int) cacheNamespaces {
	v := int64(max(vocab, 1))
	// -(1 + t + v×ns) > -mediaKeyBase for every t < v: tags stay above
	// media key tokens (media.go).
	fit := (int64(mediaKeyBase) - 1 - v) / v
	return cacheNamespaces{vocab: v, max: int32(min(maxCacheNamespaces, max(fit, 0))), ids: map[string]int32{}}
}

// of is a's namespace, numbered on first use; false when none is left.
func (c *cacheNamespaces) of(a adapterSet) (int32, bool) {
	if id, ok := c.ids[a.key]; ok {
		return id, true
	}
	if int32(len(c.ids)) >= c.max {
		return -1, false
	}
	id := int32(len(c.ids))
	c.ids[a.key] = id
	return id, true
}

// tag is tokens as the cache sees them in namespace ns.
func (c *cacheNamespaces) tag(ns int32, tokens []engine.Token) []engine.Token {
	out := make([]engine.Token, len(tokens))
	base := 1 + c.vocab*int64(ns)
	for i, t := range tokens {
		out[i] = engine.Token(-(base + int64(t)))
	}
	return out
}

// cacheKey is j's prompt as the cache sees it: the set's namespace, given
// on the job's first admission.
func (p *planner) cacheKey(j *job) ([]engine.Token, bool) {
	if j.cacheNS < 0 {
		ns, ok := p.cacheNS.of(j.adapters)
		if !ok {
			return nil, false
		}
		j.cacheNS = ns
	}
	return p.cacheNS.tag(j.cacheNS, j.prompt), true
}

// releaseOf is seq given back holding tokens (j's): published in the base
// namespace, in j's set's, or discarded when the set has none.
func (p *planner) releaseOf(j *job, seq int32, tokens []engine.Token) release {
	switch {
	case j.adapters.none():
		return release{seq: seq, tokens: tokens}
	case j.cacheNS >= 0:
		return release{seq: seq, tokens: p.cacheNS.tag(j.cacheNS, tokens)}
	}
	return release{seq: seq, discard: true}
}
