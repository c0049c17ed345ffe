package sched

// The arbiter's decision, apart from the waiting (arbiter.go): given who
// claims the next engine step, which of them gets it. No locks, no
// goroutines, so the rule is tested as a table (arbiter_test.go).

// defaultStarvationTurns is the arbiter's starvation bound when its config
// leaves it 0: as many grants as the per-engine StarvationSteps default
// has steps, so that an interactive burst on one engine (an editor's
// completion is a few dozen steps) runs through without a worse engine's
// step in the middle, while the worse engine still moves.
const defaultStarvationTurns = 64

// turnClaim is one engine's claim on the next step: the most urgent class
// it would run, when it began waiting (a sequence number: lower waited
// longer) and how many grants went to others while it waited.
type turnClaim struct {
	class   Class
	arrival uint64
	passed  int
}

// nextTurn picks the claim that gets the next step, or -1 if there is
// none. A claim passed over bound times goes first (the longest waiting
// of such claims, if several); otherwise the most urgent class, and among
// equal classes the one that has waited longest.
func nextTurn(claims []turnClaim, bound int) int {
	best := -1
	for i := range claims {
		if best < 0 || claims[i].before(&claims[best], bound) {
			best = i
		}
	}
	return best
}

// before reports whether c is granted ahead of o.
func (c *turnClaim) before(o *turnClaim, bound int) bool {
	cs, os := c.passed >= bound, o.passed >= bound
	if cs != os {
		return cs
	}
	if !cs && c.class != o.class {
		return c.class < o.class
	}
	return c.arrival < o.arrival
}
