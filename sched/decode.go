package sched

import "math"

// Decode: how many rounds each decoding lane may run in a tick.
//
// A tick's length is set by its decode rounds. It aims at a target: short
// (a quarter second) while a newcomer could join after it, the configured
// TickTarget once every lane is busy and nothing better waits. The rounds
// that fill the target come from the measured time of one decode round;
// beside prefill, a tick's decode takes a share of the prefill's time
// instead (more when a Chat or FIM lane decodes: its reply is short and
// watched, so the prefill beside it waits, not the reply).

const (
	// decodeRoundsMax caps a lane's rounds in one tick.
	decodeRoundsMax = 256
	// decodeShareBesidePrefill is decode's time beside a tick's prefill, as
	// a share of the prefill's; decodeShareBesidePrefillInteractive while a
	// Chat or FIM lane decodes.
	decodeShareBesidePrefill            = 0.25
	decodeShareBesidePrefillInteractive = 2.0
	// openTickSecs is an open tick's target.
	openTickSecs = 0.25
)

// tickShape is what an engine's granularity makes of tick targets.
type tickShape struct {
	openSecs      float64 // target while a newcomer could join
	fullSecs      float64 // cap on the configured target while full
	decodeFloor   int     // fewest rounds a decode-only tick grants
	besidePrefill int     // fewest rounds beside prefill
}

// nativeTicks is the shape of an engine that runs a whole tick in one
// call, stepping until each lane has its rounds (superfluid's engine).
var nativeTicks = tickShape{openSecs: openTickSecs, fullSecs: math.Inf(1), decodeFloor: 32, besidePrefill: 8}

// tickTarget is how long a tick should run: short while a lane is free (a
// newcomer would wait out the tick) or finishing (its slot frees, and its
// client waits on the retire), else the configured target.
func tickTarget(shape *tickShape, configured float64, lanes, maxLanes int, finishing bool) float64 {
	if lanes < maxLanes || finishing {
		return min(configured, shape.openSecs)
	}
	return min(configured, shape.fullSecs)
}

// grantInputs is what sizing a tick's decode grant looks at.
type grantInputs struct {
	roundSecs      float64 // measured time of one decode round; 0: unknown
	prefillSecs    float64 // the tick's planned prefill at the measured rate
	prefilling     bool    // the tick carries prefill
	interactive    bool    // a Chat or FIM lane decodes
	targetSecs     float64
	firstOut       int // fewest tokens any decoding lane has left; -1: none limited
	haveCandidates bool
}

// decodeGrant is the rounds each decoding lane may run this tick.
func decodeGrant(shape *tickShape, in grantInputs) int {
	if in.roundSecs <= 0 || !in.haveCandidates {
		return shape.decodeFloor
	}
	if in.prefilling {
		share := decodeShareBesidePrefill
		if in.interactive {
			share = decodeShareBesidePrefillInteractive
		}
		return int(clampF(in.prefillSecs*share/in.roundSecs, float64(shape.besidePrefill), decodeRoundsMax))
	}
	rounds := int(clampF(in.targetSecs/in.roundSecs, float64(shape.decodeFloor), decodeRoundsMax))
	// End the tick when the first lane runs out of tokens: its slot frees
	// and its client gets its result, so nobody waits on the rest.
	if in.firstOut >= 0 {
		rounds = min(rounds, max(in.firstOut, shape.besidePrefill))
	}
	return rounds
}
