package sched

// The throughput gate: a lane drafts only while drafting pays. Drafted
// rows are not free — on a CPU a step's time grows with its rows — so a
// lane whose drafts are seldom accepted makes every lane in its steps
// slower. Each lane measures what its drafted steps commit: its tokens per
// step (the accepted drafts and the model's own token) over the step's
// time, smoothed. A plain step commits one token per lane in the time a
// decode-only step without drafts takes at the same number of decoding
// lanes (specBaseline, learnt from the engine's own steps). After
// specProbeSteps drafted steps the lane compares the two: at less than
// minGain times the plain rate (the seeds' 1.08) it stops drafting for
// specReprobeSteps of its decode steps, then probes again; each failed
// probe doubles the wait, up to specReprobeMaxSteps, so a lane whose
// drafts never land costs a few steps in a thousand. A probe that pays
// resets the wait; a lane drafting keeps measuring and stops as soon as
// the smoothed rate falls below the bar.

const (
	defaultSpecMinGain  = 1.08
	specProbeSteps      = 2
	specReprobeSteps    = 32
	specReprobeMaxSteps = 1024
	// specBaselineEvery: a baseline (no drafts) decode-only step is taken
	// after this many drafted ones at the same lane count, so the plain
	// rate the gate compares against stays current as contexts deepen.
	specBaselineEvery = 64
)

// laneGate is one lane's gate; the zero value probes.
type laneGate struct {
	off bool
	// offFor is the lane's decode steps left before it probes again.
	offFor  int
	backoff int
	// Smoothed tokens committed and seconds of the lane's drafted steps
	// since the probe began, and how many there were.
	tokens, secs float64
	drafted      int
	// accepted is the draft tokens the lane's drafted steps accepted,
	// smoothed over every probe: what sizes its drafts.
	accepted float64
	measured bool
}

// drafts reports whether the lane may draft in the next step.
func (g *laneGate) drafts() bool { return !g.off }

// observeDrafted takes in one of the lane's drafted steps: committed
// tokens in secs; plainSecs is a plain decode-only step's time at the
// step's lane count (0: not known). It reports whether the gate closed.
func (g *laneGate) observeDrafted(committed int, secs, plainSecs, minGain float64) bool {
	if secs <= 0 {
		return false
	}
	g.accepted, g.measured = smooth(g.accepted, float64(max(committed-1, 0))), true
	g.tokens = smooth(g.tokens, float64(committed))
	g.secs = smooth(g.secs, secs)
	g.drafted++
	if g.drafted < specProbeSteps || plainSecs <= 0 {
		return false
	}
	if g.gain(plainSecs) >= minGain {
		g.backoff = 0
		return false
	}
	g.close()
	return true
}

// gain is the lane's drafted rate over the plain rate (one token a plain
// step).
func (g *laneGate) gain(plainSecs float64) float64 {
	if g.secs <= 0 {
		return 0
	}
	return g.tokens / g.secs * plainSecs
}

func (g *laneGate) close() {
	if g.backoff == 0 {
		g.backoff = specReprobeSteps
	} else {
		g.backoff = min(2*g.backoff, specReprobeMaxSteps)
	}
	*g = laneGate{off: true, offFor: g.backoff, backoff: g.backoff, accepted: g.accepted, measured: g.measured}
}

// draftLen is how many tokens the lane's next draft may carry, at most
// max: one more than the run its drafts have been accepted for, smoothed.
// On a CPU every draft row costs a good part of a plain step (measured on
// the 0.5B model: a step of 1+k rows a lane takes 1.2x at k = 1, 1.4x at
// 2, 2.5x at 4), so rows past what the lane's drafts usually get right are
// paid for nothing; a lane copying text verbatim grows its drafts one
// token a step to max. A lane not measured yet starts at 2.
func (g *laneGate) draftLen(max int) int {
	if !g.measured {
		return min(2, max)
	}
	return min(max, int(g.accepted+0.5)+1)
}

// observePlain takes in one of the lane's decode steps without a draft;
// a closed gate counts down to its next probe.
func (g *laneGate) observePlain() {
	if !g.off {
		return
	}
	g.offFor--
	if g.offFor <= 0 {
		*g = laneGate{backoff: g.backoff, accepted: g.accepted, measured: g.measured}
	}
}

// paid reports whether the lane's probe has run its steps at or above the
// bar: observeDrafted keeps the gate open and clears the wait then.
func (g *laneGate) paid() bool {
	return !g.off && g.backoff == 0 && g.drafted >= specProbeSteps
}

// modelGate is what the lanes' gates have learnt, kept for the lanes to
// come: a new lane starts from it rather than probing afresh. Requests are
// often short — a tool call, a chat reply of a few dozen tokens — and were
// every new lane to probe, a source whose drafts never land would cost
// its probe steps on each request: several percent of a 48-token one
// (measured with MTP drafts beside llama-server). It counts down in steps
// as a lane's gate does, so the model still probes again after the same
// doubling waits, however short its requests; a probe that pays opens it
// for every lane that starts after.
type modelGate struct{ g laneGate }

// start is a new lane's gate.
func (m *modelGate) start() laneGate { return m.g }

// learn takes in a lane's gate that just closed or whose probe just paid.
func (m *modelGate) learn(g laneGate) {
	m.g = laneGate{off: g.off, offFor: g.offFor, backoff: g.backoff, accepted: g.accepted, measured: g.measured}
}

// step counts one step down towards the next probe.
func (m *modelGate) step() { m.g.observePlain() }

// specBaseline is the time of a plain decode-only step (no drafts) by the
// number of decoding lanes, smoothed, and how many drafted steps ran at
// that count since it was last measured.
type specBaseline struct {
	secs  []float64
	stale []int
}

func newSpecBaseline(lanes int) specBaseline {
	return specBaseline{secs: make([]float64, lanes+1), stale: make([]int, lanes+1)}
}

// plainSecs is the plain step time at n decoding lanes; 0: not known.
func (b *specBaseline) plainSecs(n int) float64 {
	if n <= 0 || n >= len(b.secs) {
		return 0
	}
	return b.secs[n]
}

// due reports whether the next decode-only step at n lanes should run
// without drafts to measure (or re-measure) the plain step time.
func (b *specBaseline) due(n int) bool {
	if n <= 0 || n >= len(b.secs) {
		return false
	}
	return b.secs[n] <= 0 || b.stale[n] >= specBaselineEvery
}

// observe takes in a decode-only step at n lanes: plain (no drafts) steps
// set the baseline, drafted ones age it.
func (b *specBaseline) observe(n int, drafted bool, secs float64) {
	if n <= 0 || n >= len(b.secs) || secs <= 0 {
		return
	}
	if drafted {
		b.stale[n]++
		return
	}
	b.secs[n] = smooth(b.secs[n], secs)
	b.stale[n] = 0
}
