package sched

import (
	"fmt"
	"math"
	"math/rand/v2"

	"superfluid/engine"
)

// Synthetic acceptance (benchmarking only; llama-server's --spec-synth-len
// and --spec-synth-rates): every decoding lane drafts DraftMax tokens each
// decode-only step, and the engine commits a drawn number of them whatever
// the model makes of them (engine.Decode.SynthAccept), so the machinery's
// speed can be measured at a set acceptance on a random-weight model, which
// never agrees with a draft. The output is not the model's.

// SynthRates resolves llama.cpp's synthetic acceptance settings for drafts
// of draftMax tokens: rates, the unconditional probability that each draft
// position is accepted (draftMax values, non-increasing, in [0, 1]), or
// meanLen, the mean tokens a step commits including the model's own (in
// [1, draftMax+1]; 0: unset), whose rates are p, p², … with p chosen to
// give it. At most one of the two; neither gives nil.
func SynthRates(rates []float64, meanLen float64, draftMax int) ([]float64, error) {
	switch {
	case len(rates) > 0 && meanLen != 0:
		return nil, fmt.Errorf("sched: synthetic acceptance length and rates are mutually exclusive")
	case len(rates) > 0:
		if len(rates) != draftMax {
			return nil, fmt.Errorf("sched: synthetic acceptance rates: %d values for drafts of %d tokens", len(rates), draftMax)
		}
		for i, r := range rates {
			if !(r >= 0 && r <= 1) || (i > 0 && r > rates[i-1]) {
				return nil, fmt.Errorf("sched: synthetic acceptance rates must be within [0, 1] and non-increasing")
			}
		}
		return append([]float64(nil), rates...), nil
	case meanLen == 0:
		return nil, nil
	}
	if !(meanLen >= 1 && meanLen <= float64(draftMax+1)) {
		return nil, fmt.Errorf("sched: synthetic acceptance length %v outside [1, %d]", meanLen, draftMax+1)
	}
	p := 1.0
	if meanLen == 1 {
		p = 0
	} else if meanLen < float64(draftMax+1) {
		lo, hi := 0.0, 1.0
		for range 60 {
			mid := (lo + hi) / 2
			if geometricSum(mid, draftMax) < meanLen-1 {
				lo = mid
			} else {
				hi = mid
			}
		}
		p = (lo + hi) / 2
	}
	out := make([]float64, draftMax)
	r := p
	for i := range out {
		out[i] = r
		r *= p
	}
	return out, nil
}

// geometricSum is p + p² + … + pⁿ.
func geometricSum(p float64, n int) float64 {
	sum, term := 0.0, p
	for range n {
		sum += term
		term *= p
	}
	return sum
}

// synthState draws how many of a draft's tokens a step commits.
type synthState struct {
	// cond[i] is the probability position i is accepted once every
	// position before it was.
	cond []float64
	rng  *rand.Rand
}

func newSynthState(rates []float64) synthState {
	if len(rates) == 0 {
		return synthState{}
	}
	cond := make([]float64, len(rates))
	prev := 1.0
	for i, r := range rates {
		if prev > 0 {
			cond[i] = r / prev
		}
		prev = r
	}
	return synthState{cond: cond, rng: rand.New(rand.NewPCG(0x5eed5, 0x51a7))}
}

func (s *synthState) on() bool { return len(s.cond) > 0 }

// accepts draws the tokens of an n-token draft committed.
func (s *synthState) accepts(n int) int {
	m := 0
	for m < n && m < len(s.cond) && s.rng.Float64() < s.cond[m] {
		m++
	}
	return m
}

// synthDraft fills a synthetic draft to k tokens: what the drafter found,
// then the lane's last token over again (the tokens matter not).
func synthDraft(draft, history []engine.Token, k int) []engine.Token {
	last := history[len(history)-1]
	for len(draft) < k {
		draft = append(draft, last)
	}
	return draft
}

// synthMeanLen is the mean tokens a step commits at these rates.
func synthMeanLen(rates []float64) float64 {
	l := 1.0
	for _, r := range rates {
		l += r
	}
	return math.Round(l*1e6) / 1e6
}
