package sched

// Prefill: which lanes' prompts go into a tick, and how many tokens.
//
// A tick's prompt tokens are a budget (prefillBudget) handed out in
// prefillRank order: the shortest remaining prompt first, so prompts that
// arrived together finish one after another instead of all finishing late,
// except that a lane passed over by younger lanes for StarvationTicks
// ticks goes first. Once a prompt completes, the rest of the tick is
// capped (the tail cap), and when a Chat or FIM prompt completes nothing of
// a worse class prefills beside it: that prompt's first token is what a
// person waits for.

const (
	// maxPrefillBudget is the ceiling of a tick's prompt tokens.
	maxPrefillBudget = 4096
	// soloPrefillBudget is the ceiling for one lane alone with nothing
	// queued: nobody waits on the tick but its own request.
	soloPrefillBudget = 16384
	// startPrefillBudget is where the adaptive budget starts.
	startPrefillBudget = 1024
	// minAdaptivePrefillBudget is the adaptive budget's floor.
	minAdaptivePrefillBudget = 256
	// prefillTailFloor: the tail cap never cuts the rest of a tick below
	// this many tokens.
	prefillTailFloor = 256
	// prefillRateMinTokens: a tick with fewer prompt tokens says too little
	// about the prefill rate to learn from; bulkRateMinTokens for the bulk
	// rate that sizes whole ticks.
	prefillRateMinTokens = 256
	bulkRateMinTokens    = 512

	// maxPrefillTickSecs bounds a full tick's prefill; a lone lane with
	// nothing queued may take maxLonePrefillTickSecs.
	maxPrefillTickSecs     = 8.0
	maxLonePrefillTickSecs = 16.0
	// openPrefillTickSecs bounds the prefill of a tick a newcomer could
	// join after: it waits for the tick in flight, so this bounds its time
	// to first token. On an engine that yields mid-tick when such a request
	// arrives, and with no Chat or FIM around, the bound is
	// openPrefillTickSecsYielding.
	openPrefillTickSecs         = 0.5
	openPrefillTickSecsYielding = 2.0
	// openPrefillTickMax caps an open tick in tokens whatever the learned
	// rate says: an engine that returns before its work ends makes an early
	// tick look all but free.
	openPrefillTickMax = 1024
	// openPrefillUnlearned is an open tick's prefill until two bulk ticks
	// have taught the rate.
	openPrefillUnlearned = 512

	// shortReplySecs: a Chat or FIM reply that ends within this much
	// decoding holds Agent and Background prefill back until it is done;
	// shortReplyTokens while the round time is unknown.
	shortReplySecs   = 4.0
	shortReplyTokens = 128
	// maxShortReplyHoldSecs bounds a run of such holds: then one tick
	// prefills the others, so back-to-back replies cannot starve them.
	maxShortReplyHoldSecs = 8.0
)

// prefillBudget hands out one tick's prompt tokens. room is what the
// tick's first step has left for them: the engine's batch less one token
// per decoding lane and the chunks already taken. Nothing raises the
// budget past it, so no plan's first step exceeds the batch.
type prefillBudget struct {
	left       int
	room       int
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
	return prefillBudget{left: min(n, room), room: room}
}

// offer is how much of want the budget grants.
func (b *prefillBudget) offer(want int) int { return min(want, b.left) }

// offerTo is offer for a lane of class c: nothing while a better class's
// prompt completes this tick.
func (b *prefillBudget) offerTo(want int, c Class) int {
	if b.holding && c > b.heldBelow {
		return 0
	}
	if b.worseLimited && c > b.worseThan {
		want = min(want, b.worseLeft)
	}
	return b.offer(want)
}

// interactiveChunk is the prompt a Chat or FIM lane may prefill in one
// tick, whatever the tick's budget: the whole of a typical completion
// prompt, in one step of about a second on a small model.
const interactiveChunk = 512

// starvedShareDivisor: while a Chat or FIM prompt waits, starving lanes of
// worse classes (which rank ahead of it) take at most this fraction of the
// step between them. They still move, so a stream of editor requests cannot
// starve them, but at the CPU's 64-token steps a starving lane that filled
// the step alone would halve the waiting prompt's speed.
const starvedShareDivisor = 4

// limitWorse caps what lanes of classes worse than c may take, in total,
// for the rest of the tick: the share starving lanes get while a prompt of
// class c waits.
func (b *prefillBudget) limitWorse(c Class) {
	b.worseLimited = true
	b.worseThan = c
	b.worseLeft = max(1, b.room/starvedShareDivisor)
}

// grow raises what is left of the budget to at least n tokens, within the
// step's room, unless a prompt already completed this tick (the tail cap
// rules then).
func (b *prefillBudget) grow(n int) {
	if !b.tailCapped {
		b.left = max(b.left, min(n, b.room))
	}
}

// holdBelow: a Chat or FIM prompt of class c completes this tick, so no
// worse class prefills beside it and its first token is not held behind
// someone else's prompt.
func (b *prefillBudget) holdBelow(c Class) {
	if !b.holding || c < b.heldBelow {
		b.heldBelow = c
	}
	b.holding = true
}

// take spends chunk tokens. The first chunk that completes a prompt caps
// what is left at that chunk's size (at least prefillTailFloor): the
// prompt's first token comes at the end of the step that carries it, so a
// large tail beside it would delay the token for someone else's prompt.
func (b *prefillBudget) take(chunk int, completes bool, c Class) {
	b.left -= chunk
	b.room -= chunk
	if b.worseLimited && c > b.worseThan {
		b.worseLeft -= chunk
	}
	if completes && !b.tailCapped {
		b.tailCapped = true
		b.left = min(b.left, max(chunk, prefillTailFloor))
	}
}

// prefillRank orders lanes for a tick's prefill.
type prefillRank struct {
	starving  bool
	class     Class
	remaining int
	tag       uint32
}

// rankOf ranks a lane: a starving lane (passed over for bound ticks, with
// prompt left) first, then better classes, then the shortest remaining
// prompt, then the oldest lane.
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

// starvedAfter is a lane's starved-tick count after a tick: waiting (prompt
// left, none of it this tick) counts only when a younger lane was served,
// so lanes that arrived together never starve each other: they take turns
// by length, not by age.
func starvedAfter(prev int, waiting bool, youngestServed uint32, served bool, tag uint32) int {
	if waiting && served && youngestServed > tag {
		return prev + 1
	}
	return prev
}

// prefillTickCap is the prompt tokens a full tick may take at secsPerToken:
// maxPrefillTickSecs' worth (twice that for a lone lane), within
// [512, maxPrefillBudget].
func prefillTickCap(secsPerToken float64, lone bool) int {
	secs := maxPrefillTickSecs
	if lone {
		secs = maxLonePrefillTickSecs
	}
	return int(clampF(secs/secsPerToken, 512, maxPrefillBudget))
}

// openPrefillTickTarget is how long an open tick's prefill may run: longer
// on an engine that yields at its next step when a request arrives, unless
// a Chat or FIM request is around to wait on each tick.
func openPrefillTickTarget(yields, latency bool) float64 {
	if yields && !latency {
		return openPrefillTickSecsYielding
	}
	return openPrefillTickSecs
}

// openPrefillTickCap is an open tick's prompt tokens: targetSecs' worth,
// in whole 512-token chunks, or whole 128-token steps on a model where one
// chunk takes longer than that; never below one step or above
// openPrefillTickMax.
func openPrefillTickCap(secsPerToken, targetSecs float64) int {
	tokens := int(clampF(targetSecs/secsPerToken, 128, openPrefillTickMax))
	step := 512
	if tokens < 512 {
		step = 128
	}
	return tokens / step * step
}

func clampF(v, lo, hi float64) float64 { return min(max(v, lo), hi) }
