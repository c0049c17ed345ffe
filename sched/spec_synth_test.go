package sched

import (
	"math"
	"testing"
)

func TestSynthRatesResolve(t *testing.T) {
	r, err := SynthRates(nil, 3, 4)
	if err != nil || len(r) != 4 {
		t.Fatalf("length 3 of 4: %v, %v", r, err)
	}
	if got := synthMeanLen(r); math.Abs(got-3) > 1e-6 {
		t.Fatalf("rates %v give a mean length of %v, want 3", r, got)
	}
	for i := 1; i < len(r); i++ {
		if math.Abs(r[i]-r[0]*r[i-1]) > 1e-12 {
			t.Fatalf("rates %v are not p, p², …", r)
		}
	}
	if r, _ := SynthRates(nil, 5, 4); r[3] != 1 {
		t.Fatalf("the longest mean length accepts everything: %v", r)
	}
	if r, _ := SynthRates(nil, 1, 4); r[0] != 0 {
		t.Fatalf("a mean length of 1 accepts nothing: %v", r)
	}
	if r, err := SynthRates([]float64{0.9, 0.5}, 0, 2); err != nil || r[1] != 0.5 {
		t.Fatalf("rates as given: %v, %v", r, err)
	}
	if r, err := SynthRates(nil, 0, 4); r != nil || err != nil {
		t.Fatalf("unset: %v, %v", r, err)
	}
	for name, c := range map[string]struct {
		rates []float64
		len   float64
	}{
		"both":              {[]float64{0.5, 0.2}, 2},
		"too few rates":     {[]float64{0.5}, 0},
		"rising rates":      {[]float64{0.5, 0.6}, 0},
		"a rate above 1":    {[]float64{1.5, 0.6}, 0},
		"a NaN rate":        {[]float64{math.NaN(), 0}, 0},
		"length below 1":    {nil, 0.5},
		"length past max+1": {nil, 3.5},
		"NaN length":        {nil, math.NaN()},
	} {
		if _, err := SynthRates(c.rates, c.len, 2); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The draws commit, on average, the rates' mean length less the model's
// own token.
func TestSynthAcceptsAtTheRates(t *testing.T) {
	rates, _ := SynthRates(nil, 3, 4)
	s := newSynthState(rates)
	const n = 20000
	sum := 0
	for range n {
		sum += s.accepts(4)
	}
	if mean := float64(sum) / n; math.Abs(mean-2) > 0.05 {
		t.Fatalf("%v tokens accepted a draft on average, want 2", mean)
	}
}

// Through the scheduler on the fake engine: at rate 1 every draft token
// is committed, at rate 0 none, whatever the model says.
func TestSynthAcceptanceThroughTheScheduler(t *testing.T) {
	reqs := map[string]Request{
		"a": {Prompt: repeatingPrompt(5, 30), Class: Chat, MaxTokens: 50},
		"b": {Prompt: repeatingPrompt(7, 30), Class: Agent, MaxTokens: 50},
	}
	_, all, _ := specRun(t, Speculation{Type: SpecNgramSimple, DraftMax: 3, SynthRates: []float64{1, 1, 1}}, 0, reqs)
	if all.DraftTokens == 0 || all.DraftAccepted != all.DraftTokens {
		t.Fatalf("rate 1: %d of %d accepted", all.DraftAccepted, all.DraftTokens)
	}
	_, none, _ := specRun(t, Speculation{Type: SpecNgramSimple, DraftMax: 3, SynthRates: []float64{0, 0, 0}}, 0, reqs)
	if none.DraftTokens == 0 || none.DraftAccepted != 0 {
		t.Fatalf("rate 0: %d of %d accepted", none.DraftAccepted, none.DraftTokens)
	}
	if all.Ticks >= none.Ticks || all.DecodeTokens != none.DecodeTokens {
		t.Fatalf("rate 1 took %d steps for %d tokens, rate 0 %d for %d", all.Ticks, all.DecodeTokens, none.Ticks, none.DecodeTokens)
	}
	if err := (Speculation{SynthRates: []float64{1}}).Check(); err == nil {
		t.Fatal("synthetic acceptance without a draft source was accepted")
	}
}
