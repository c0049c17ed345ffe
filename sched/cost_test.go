package sched

import (
	"math"
	"testing"
	"time"

	"superfluid/engine"
)

// stepOf is a synthetic prefill step: n prompt tokens from depth, which
// cost a + b·position each plus fixed.
func stepOf(depth, n int, fixed, a, b float64) (rows int, depthSum, secs float64) {
	fn := float64(n)
	depthSum = fn*float64(depth) + fn*(fn-1)/2
	return n, depthSum, fixed + fn*a + b*depthSum
}

// noise is a deterministic factor in [1-amp, 1+amp].
type noise struct{ x uint64 }

func (r *noise) factor(amp float64) float64 {
	r.x ^= r.x << 13
	r.x ^= r.x >> 7
	r.x ^= r.x << 17
	return 1 + amp*(2*float64(r.x%10001)/10000-1)
}

func TestRowCostRecoversADepthLine(t *testing.T) {
	const a, b = 2e-4, 1e-6
	var c rowCost
	for depth := 0; depth < 6000; depth += 512 {
		c.observe(stepOf(depth, 512, 0, a, b))
	}
	if math.Abs(c.a-a)/a > 1e-6 || math.Abs(c.b-b)/b > 1e-6 {
		t.Fatalf("fit a=%g b=%g, want a=%g b=%g", c.a, c.b, a, b)
	}
	// A fixed cost per step is folded into a at the step size learnt.
	var f rowCost
	for depth := 0; depth < 6000; depth += 256 {
		f.observe(stepOf(depth, 256, 0.01, a, b))
	}
	if want := a + 0.01/256; math.Abs(f.a-want)/want > 1e-6 || math.Abs(f.b-b)/b > 1e-6 {
		t.Fatalf("with a fixed cost: fit a=%g b=%g, want a=%g b=%g", f.a, f.b, want, b)
	}
}

func TestRowCostIsFlatUntilDepthsSpread(t *testing.T) {
	var c rowCost
	if c.known() || c.tokensWithin(0.5, 0) != maxTokens {
		t.Fatal("an empty model bounds something")
	}
	// One depth, different step times: no slope can be told from them.
	c.observe(100, 100*1000, 0.1)
	c.observe(100, 100*1010, 0.12)
	if c.b != 0 || c.a <= 0 {
		t.Fatalf("steps at one depth: a=%g b=%g, want a flat rate", c.a, c.b)
	}
	if want := (0.8*0.001 + 0.0012) / 1.8; math.Abs(c.a-want) > 1e-12 {
		t.Fatalf("flat rate %g, want the weighted mean %g", c.a, want)
	}
	// Deeper steps measured cheaper (a warming cache, say): never a
	// negative slope.
	var d rowCost
	for depth := 0; depth < 4000; depth += 512 {
		d.observe(stepOf(depth, 512, 0, 1e-3-float64(depth)*1e-7, 0))
	}
	if d.b != 0 || d.a <= 0 {
		t.Fatalf("cheaper deep steps: a=%g b=%g", d.a, d.b)
	}
	// A slope steeper than the times at depth 0 allow: through the origin.
	var e rowCost
	e.observe(64, 64*1031.5, 64*1e-4)
	e.observe(64, 64*2031.5, 64*2e-3)
	if e.a != 0 || e.b <= 0 {
		t.Fatalf("a=%g b=%g, want a line through the origin", e.a, e.b)
	}
}

// Through one long prompt, with ±20% noise on every step and a stall or a
// too-short step now and then, the next step is predicted within 25%.
func TestRowCostToleratesNoiseAndOutliers(t *testing.T) {
	const a, b = 2e-4, 1e-6
	var c rowCost
	r := noise{x: 7}
	for i := range 40 {
		depth := i * 384
		rows, ds, secs := stepOf(depth, 384, 0, a, b)
		if pred := c.chunkSecs(depth, 384); i >= 3 && math.Abs(pred-secs)/secs > 0.25 {
			t.Errorf("step %d at depth %d: predicted %.3f s, takes %.3f s", i, depth, pred, secs)
		}
		secs *= r.factor(0.2)
		switch i % 9 {
		case 4:
			secs *= 50 // a stall
		case 7:
			secs /= 50
		}
		c.observe(rows, ds, secs)
	}
	if c.a < 0 || c.b <= 0 {
		t.Fatalf("a=%g b=%g", c.a, c.b)
	}
}

func TestRowCostSurvivesHostileTimings(t *testing.T) {
	var c rowCost
	for _, secs := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		c.observe(512, 512*100, secs)
	}
	c.observe(0, 0, 1)
	c.observe(512, math.NaN(), 1)
	c.observe(512, -5, 1)
	if c.known() {
		t.Fatalf("nothing valid observed, yet a=%g b=%g", c.a, c.b)
	}
	c.observe(512, 512*100, math.MaxFloat64)
	c.observe(64, 64*9000, 1e-300)
	c.observe(512, 512*3e6, 0.2)
	for _, v := range []float64{c.a, c.b, c.w, c.sx, c.sy, c.sxx, c.sxy} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("model state %+v not finite and non-negative", c)
		}
	}
	for _, depth := range []int{0, 1 << 20} {
		n := c.tokensWithin(joinWaitSecs, depth)
		if n < 0 || n > maxTokens {
			t.Fatalf("tokensWithin at depth %d = %d", depth, n)
		}
		if j := joinWaitTokens(&c, depth, 1e300); j != joinWaitMinTokens {
			t.Fatalf("joinWaitTokens beside endless rows = %d", j)
		}
	}

	// Through the planner: a step time of 292 years, then none at all.
	p := newPlanner(Config{}, &engine.Descriptor{Batch: 512}, &counters{})
	p.stepRows, p.stepDepth = 512, 512*1000
	p.learn(&engine.Timings{StepNS: math.MaxInt64, PrefillTokens: 512}, 0)
	p.learn(&engine.Timings{StepNS: 0, PrefillTokens: 512}, 0)
	p.learn(&engine.Timings{StepNS: -1, PrefillTokens: 512}, -time.Second)
	if n := joinWaitTokens(&p.prefillCost, 1000, 0); n != joinWaitMinTokens {
		t.Fatalf("after an absurd step the bound is %d tokens, want the minimum", n)
	}
	if math.IsNaN(p.decodeOwed) || p.decodeOwed > decodeShare(false)*512*maxRowSecs {
		t.Fatalf("decode owed %g s after one absurd step", p.decodeOwed)
	}
	owed := p.decodeOwed
	p.learn(&engine.Timings{StepNS: math.MaxInt64, PrefillTokens: 512}, 0)
	if grown := p.decodeOwed - owed; grown > decodeShare(false)*outlierFactor*p.prefillCost.stepSecs(512, 512*1000) {
		t.Fatalf("a second absurd step owes decode %g s more", grown)
	}
}

func TestTokensWithinIsTheLargestChunkThatFits(t *testing.T) {
	for _, c := range []rowCost{
		{w: 1, a: 2e-4},
		{w: 1, a: 2e-4, b: 1e-6},
		{w: 1, b: 3e-7},
	} {
		for _, depth := range []int{0, 1, 777, 8000, 100000} {
			n := c.tokensWithin(joinWaitSecs, depth)
			if n > 0 && c.chunkSecs(depth, n) > joinWaitSecs {
				t.Errorf("%+v at %d: %d tokens take %g s", c, depth, n, c.chunkSecs(depth, n))
			}
			if c.chunkSecs(depth, n+1) <= joinWaitSecs {
				t.Errorf("%+v at %d: %d tokens, but %d fit", c, depth, n, n+1)
			}
		}
	}
}
