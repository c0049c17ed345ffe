package sched

// Decode: which lanes put a token into a step, and when a step decodes
// without prefill.
//
// Every decoding lane puts one token into every step it is planned into,
// prefill steps included. Beside prefill, decode is owed a share of the
// prefill steps' measured time: after a step carrying prompt tokens, the
// planner runs decode-only steps until they have taken
// decodeShareBesidePrefill of its time (decodeShareBesidePrefillInteractive
// while a streamed Chat or FIM reply decodes, whose short reply matters more than
// someone's prompt), then prefills again. Agent and Background lanes may
// be throttled to one step in N (BackgroundDivisor); a lane passed over for
// StarvationSteps steps goes first.

const (
	decodeShareBesidePrefill            = 0.25
	decodeShareBesidePrefillInteractive = 2.0
)

// decodeShare is decode's time owed per second of a prefill step.
func decodeShare(interactiveDecoding bool) float64 {
	if interactiveDecoding {
		return decodeShareBesidePrefillInteractive
	}
	return decodeShareBesidePrefill
}
