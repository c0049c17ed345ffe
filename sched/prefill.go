package sched

// Prefill: which lanes' prompts go into a step, and how many tokens.
//
// A step's prompt tokens are a budget (stepPrefillBudget) handed out in
// prefillRank order: the shortest remaining prompt first, so prompts that
// arrived together finish one after another instead of all finishing late,
// except that a lane passed over by younger lanes for StarvationSteps
// prefill steps goes first. Once a prompt completes, the rest of the step
// is capped (the tail cap), and when a Chat or FIM prompt completes nothing
// of a worse class prefills beside it: that prompt's first token is what a
// person waits for.

const (
	// prefillTailFloor: the tail cap never cuts the rest of a step below
	// this many tokens. It binds on steps above it (a 512-token
	// micro-batch or more); a 64-token step has no tail to cut.
	prefillTailFloor = 256

	// joinWaitSecs bounds the prefill of a step a newcomer could join
	// after (a lane is free, or a Chat/FIM request could take one): it
	// waits for the step in flight, so this bounds that wait. A step never
	// goes below joinWaitMinTokens for it (smaller steps lose more
	// throughput than they save a newcomer).
	joinWaitSecs      = 0.5
	joinWaitMinTokens = 64
	// joinWaitGrain: the bound is rounded down to whole steps of this many
	// tokens. Deep in a long prompt half a second may be only a hundred or
	// so tokens, and whole 64-token steps would then lose up to a third of
	// it.
	joinWaitGrain = 16

	// shortReplySecs: a Chat or FIM reply that ends within this much
	// decoding holds Agent and Background prefill back until it is done;
	// shortReplyTokens while the decode step time is unknown.
	shortReplySecs   = 4.0
	shortReplyTokens = 128
	// maxShortReplyHoldSecs bounds a run of such holds: then one step
	// prefills the others, so back-to-back replies cannot starve them.
	maxShortReplyHoldSecs = 8.0

	// starvedShareDivisor: while a Chat or FIM prompt waits, starving lanes
	// of worse classes (which rank ahead of it) take at most this fraction
	// of the step between them. They still move, so a stream of editor
	// requests cannot starve them, but a starving lane that filled the
	// step alone would halve the waiting prompt's speed.
	starvedShareDivisor = 4
)

// prefillBudget hands out one step's prompt tokens. room is what the step
// has left for them: the engine's batch less one token per decoding lane
// and the chunks already taken. Nothing raises the budget past it, so no
// plan exceeds the batch.
type prefillBudget struct {
	left int
	room int
	// size is the step's budget as planned, before a Chat or FIM prompt
	// grew it; growMax is the most such a prompt may grow it to.
	size       int
	growMax    int
	tailCapped bool
	holding    bool  // heldBelow is set
	heldBelow  Class // classes worse than this get nothing
	// worseLimited: classes worse than worseThan share worseLeft tokens.
	worseLimited bool
	worseThan    Class
	worseLeft    int
}

func newPrefillBudget(n, room int) prefillBudget {
	room = max(room, 0)
	return prefillBudget{left: min(n, room), room: room, size: min(n, room), growMax: room}
}

// offer is how much of want the budget grants.
func (b *prefillBudget) offer(want int) int { return min(want, b.left) }

// offerTo is offer for a lane of class c: nothing while a better class's
// prompt is held for, and no more than worse classes' share.
func (b *prefillBudget) offerTo(want int, c Class) int {
	if b.holding && c > b.heldBelow {
		return 0
	}
	if b.worseLimited && c > b.worseThan {
		want = min(want, b.worseLeft)
	}
	return b.offer(want)
}

// limitWorse caps what lanes of classes worse than c may take, in total,
// for the rest of the step: the share starving lanes get while a prompt of
// class c waits, a quarter of the step as planned (the batch may be far
// bigger than a step: its quarter would be seconds of someone else's
// prompt beside the waiting one).
func (b *prefillBudget) limitWorse(c Class) {
	b.worseLimited = true
	b.worseThan = c
	b.worseLeft = max(1, b.size/starvedShareDivisor)
}

// grow raises what is left of the budget to at least n tokens, within the
// step's room and growMax, unless a prompt already completed in this step
// (the tail cap rules then).
func (b *prefillBudget) grow(n int) {
	if !b.tailCapped {
		b.left = max(b.left, min(n, b.room, b.growMax))
	}
}

// holdBelow: a Chat or FIM prompt of class c prefills, so no worse class
// prefills beside it and its first token is not held behind someone
// else's prompt.
func (b *prefillBudget) holdBelow(c Class) {
	if !b.holding || c < b.heldBelow {
		b.heldBelow = c
	}
	b.holding = true
}

// take spends chunk tokens. The first chunk that completes a prompt
// whose reply streams (capsTail) caps what is left at that chunk's size
// (at least prefillTailFloor): the prompt's first token comes at the end
// of the step that carries it, so a large tail beside it would delay the
// token for someone else's prompt. A prompt whose reply is taken whole
// (Request.Whole) caps nothing: its client sees only the reply's end,
// which its neighbours' prompts in this step delay less than steps of
// their own between its tokens would.
func (b *prefillBudget) take(chunk int, capsTail bool, c Class) {
	b.left -= chunk
	b.room -= chunk
	if b.worseLimited && c > b.worseThan {
		b.worseLeft -= chunk
	}
	if capsTail && !b.tailCapped {
		b.tailCapped = true
		b.left = min(b.left, max(chunk, prefillTailFloor))
	}
}

// prefillRank orders lanes for a step's prefill.
type prefillRank struct {
	starving  bool
	class     Class
	remaining int
	tag       uint32
}

// rankOf ranks a lane: a starving lane (passed over for bound prefill
// steps, with prompt left) first, then better classes, then the shortest
// remaining prompt, then the oldest lane.
func rankOf(class Class, remaining int, tag uint32, starved, bound int) prefillRank {
	return prefillRank{starving: remaining > 0 && starved >= bound, class: class, remaining: remaining, tag: tag}
}

// before reports whether a is served before b.
func (a prefillRank) before(b prefillRank) bool {
	if a.starving != b.starving {
		return a.starving
	}
	if a.class != b.class {
		return a.class < b.class
	}
	if a.remaining != b.remaining {
		return a.remaining < b.remaining
	}
	return a.tag < b.tag
}

// starvedAfter is a lane's starved count after a prefill step: waiting
// (prompt left, none of it this step) counts only when a younger lane was
// served, so lanes that arrived together never starve each other: they
// take turns by length, not by age.
func starvedAfter(prev int, waiting bool, youngestServed uint32, served bool, tag uint32) int {
	if waiting && served && youngestServed > tag {
		return prev + 1
	}
	return prev
}

// soloWaitSecs bounds the prefill of a step that only a request yet to
// come could wait on (one lane prefills and nothing else runs or waits): it
// runs whole micro-batches, at least one, the engine's efficient size
// (llama_decode splits a step into micro-batches, and a bigger step gains
// little over one), up to what fits this long. A request that arrives
// waits out such a step: on the 2-core CPU one 512-token micro-batch of
// the 0.5b model, about 2 s.
const soloWaitSecs = 2.0

// soloTokens is the prompt tokens a step that runs alone may carry,
// starting at depth, beside rows predicted to take besideSecs: whole
// micro-batches of ubatch tokens within soloWaitSecs at cost, at least one.
func soloTokens(cost *rowCost, depth int, besideSecs float64, ubatch int) int {
	return tokensWithinWait(cost, depth, besideSecs, soloWaitSecs, ubatch, ubatch)
}

// joinWaitTokens is the prompt tokens a step a newcomer could join after
// may carry, starting at depth, beside rows predicted to take besideSecs:
// joinWaitSecs' worth at cost, in whole joinWaitGrain, never fewer than
// joinWaitMinTokens; unbounded while nothing is learnt.
func joinWaitTokens(cost *rowCost, depth int, besideSecs float64) int {
	return tokensWithinWait(cost, depth, besideSecs, joinWaitSecs, joinWaitGrain, joinWaitMinTokens)
}

// tokensWithinWait is the prompt tokens from depth that fit secs beside
// rows predicted to take besideSecs, in whole grain, never fewer than
// floor; unbounded while nothing is learnt.
func tokensWithinWait(cost *rowCost, depth int, besideSecs, secs float64, grain, floor int) int {
	if !cost.known() {
		return maxTokens
	}
	n := cost.tokensWithin(secs-besideSecs, depth)
	return max(n/grain*grain, floor)
}

// interactiveWaitSecs bounds an Agent or Background prefill step while
// another engine runs Chat or FIM work (Turn.others): its
// requests each wait out this step, so it stays short even below the
// 64-token floor, down to interactiveMinTokens. The small steps run the
// kernels at a fraction of their throughput, but only while a person is
// at work on the other model.
const (
	interactiveWaitSecs  = 0.15
	interactiveMinTokens = 8
)

// interactiveWaitTokens is joinWaitTokens at secs (interactiveWaitSecs,
// or less while an editor works here: worseWaitSecs), in whole
// interactiveMinTokens.
func interactiveWaitTokens(cost *rowCost, depth int, besideSecs, secs float64) int {
	return tokensWithinWait(cost, depth, besideSecs, secs, interactiveMinTokens, interactiveMinTokens)
}

func clampF(v, lo, hi float64) float64 { return min(max(v, lo), hi) }
