package sched

import "math"

// rowCost is the learned cost of one row of a prefill step: a + b·depth
// seconds, where depth is the row's position in its sequence (the tokens
// already in the KV cache that its attention reads). A prompt token deep
// in a long prompt costs several times one at its start (the tiny model at
// 512-token steps: 0.13 s, 0.53 s, then 1.12 s a step over one 1,500-token
// prompt), so a flat rate learned at one depth overstates what fits at a
// shallower one and, worse, understates the step at a deeper one. The
// step's fixed cost is folded into a: it is learnt at the step sizes that
// run, which are the sizes it is used to predict.
//
// The fit is a weighted least-squares line through each step's mean
// seconds per row against its rows' mean depth, with exponentially
// decaying weights (a new step weighs costWeight): from the decayed
// moments it is closed form, and the planner calls nothing but arithmetic.
// Until the steps seen span at least minDepthSpread positions (one prompt
// at one depth cannot tell a from b) it is the flat rate, the moments'
// mean. Neither coefficient is ever negative, and a step whose time is
// absurd against the fit (a stall, a clock jump, a hostile timing) counts
// as at most outlierFactor times off it, wherever the fit can judge it (a
// line; a flat rate only at about the depth it was learnt at).
type rowCost struct {
	// Decayed moments of the samples: weight, Σx, Σy, Σx², Σxy, with x the
	// mean depth of a step's rows and y its seconds per row.
	w, sx, sy, sxx, sxy float64
	a, b                float64 // the fit: seconds per row, per row and position
}

const (
	// costWeight is a new step's share of the moments: the fit follows
	// about the last 1/costWeight steps.
	costWeight = 0.2
	// minDepthSpread is the standard deviation of the samples' depths (in
	// positions) below which the fit stays flat.
	minDepthSpread = 32.0
	// outlierFactor bounds how far one step's time may pull the fit: a
	// sample is clamped to within this factor of the fit's prediction.
	outlierFactor = 1.5
	// maxRowSecs: no row of any step is taken to cost more than this (a
	// first sample has no fit to be held to); a 70B model on a CPU
	// prefills a few tokens a second.
	maxRowSecs = 10.0
)

// known reports whether a step has been learnt from.
func (c *rowCost) known() bool { return c.w > 0 && (c.a > 0 || c.b > 0) }

// observe takes in a step of rows rows whose positions sum to depthSum,
// which took secs. Samples that are not finite and positive are ignored.
func (c *rowCost) observe(rows int, depthSum, secs float64) {
	if rows <= 0 || !(secs > 0) || math.IsInf(secs, 0) || !(depthSum >= 0) || math.IsInf(depthSum, 0) {
		return
	}
	x := depthSum / float64(rows)
	y := min(secs/float64(rows), maxRowSecs)
	if c.comparable(x) {
		pred := c.rowSecs(x)
		y = clampF(y, pred/outlierFactor, pred*outlierFactor)
	}
	keep := 1 - costWeight
	c.w = keep*c.w + 1
	c.sx = keep*c.sx + x
	c.sy = keep*c.sy + y
	c.sxx = keep*c.sxx + x*x
	c.sxy = keep*c.sxy + x*y
	c.fit()
}

// fit solves the weighted least squares for a and b, held non-negative.
func (c *rowCost) fit() {
	mx, my := c.sx/c.w, c.sy/c.w
	varX := max(0, c.sxx/c.w-mx*mx)
	c.a, c.b = my, 0
	if varX < minDepthSpread*minDepthSpread {
		return // too few distinct depths: the flat rate
	}
	b := (c.sxy/c.w - mx*my) / varX
	switch {
	case b <= 0:
		// Deeper rows measured no dearer: flat.
	case my-b*mx < 0:
		// The line would cross zero before depth 0: through the origin.
		c.a, c.b = 0, max(0, c.sxy/c.sxx)
	default:
		c.a, c.b = my-b*mx, b
	}
}

// comparable reports whether the fit can judge a sample at mean depth x:
// it is a line through spread depths, or flat and x is about the depth it
// was learnt at (a flat rate cannot say what a deeper step costs).
func (c *rowCost) comparable(x float64) bool {
	if !c.known() {
		return false
	}
	mx := c.sx / c.w
	return c.spread() || math.Abs(x-mx) < minDepthSpread
}

// spread reports whether the samples' depths spread enough to fit a slope.
func (c *rowCost) spread() bool {
	mx := c.sx / c.w
	return c.sxx/c.w-mx*mx >= minDepthSpread*minDepthSpread
}

// plausible is secs, the measured time of a step of rows rows whose
// positions sum to depthSum, held to within outlierFactor of the fit's
// prediction (and maxRowSecs a row): what the planner takes it to have
// cost.
func (c *rowCost) plausible(rows int, depthSum, secs float64) float64 {
	secs = min(secs, float64(rows)*maxRowSecs)
	if rows <= 0 || !c.comparable(depthSum/float64(rows)) {
		return secs
	}
	pred := c.stepSecs(rows, depthSum)
	return clampF(secs, pred/outlierFactor, pred*outlierFactor)
}

// stepSecs is the predicted time of a step of rows rows whose positions
// sum to depthSum.
func (c *rowCost) stepSecs(rows int, depthSum float64) float64 {
	return float64(rows)*c.a + c.b*depthSum
}

// rowSecs is the predicted time of a row at depth.
func (c *rowCost) rowSecs(depth float64) float64 { return c.a + c.b*depth }

// chunkSecs is the predicted time of n prompt tokens starting at depth:
// n rows at depths depth … depth+n-1.
func (c *rowCost) chunkSecs(depth, n int) float64 {
	fn := float64(n)
	return fn*c.a + c.b*(fn*float64(depth)+fn*(fn-1)/2)
}

// tokensWithin is the most prompt tokens, starting at depth, that fit in
// secs: the largest n with chunkSecs(depth, n) ≤ secs (0 if none fits,
// maxTokens while nothing is known).
func (c *rowCost) tokensWithin(secs float64, depth int) int {
	if !c.known() {
		return maxTokens
	}
	if !(secs > 0) {
		return 0
	}
	// b/2·n² + (a + b·depth − b/2)·n − secs = 0, for the positive root.
	lin := c.a + c.b*(float64(depth)-0.5)
	var n float64
	if c.b == 0 {
		n = secs / lin
	} else {
		q := c.b / 2
		n = (-lin + math.Sqrt(lin*lin+4*q*secs)) / (2 * q)
	}
	if !(n < maxTokens) {
		return maxTokens
	}
	k := int(n)
	// Float rounding may put the root a token either side of the bound.
	for k > 0 && c.chunkSecs(depth, k) > secs {
		k--
	}
	return max(k, 0)
}

// maxTokens stands for "no bound" in token counts.
const maxTokens = 1 << 30
