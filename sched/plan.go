package sched

import (
	"time"

	"superfluid/engine"
)

// buildPlan plans the next engine step: retires of finished and preempted
// lanes, admits of lanes bound since the last step, prefill chunks under
// the step's budget, and one token for each decoding lane. The plan is
// reused across steps: a steady-state step allocates nothing.
func (p *planner) buildPlan(now time.Time) *engine.Plan {
	pl := &p.plan
	pl.Reset()
	p.rowChunks = p.rowChunks[:0]
	p.stepInteractiveDecode = false
	if len(p.lanes) == 0 {
		return pl
	}
	p.steps++
	for _, l := range p.lanes {
		l.chunk = 0
		if l.finishing {
			pl.Retires = append(pl.Retires, l.tag)
		}
	}
	decoders := p.onlyStepAdapters(p.decoders())
	pl.LoRA = append(pl.LoRA, p.stepSet.scales...)
	promptWaits, interactivePrompt := p.promptsWaiting()
	if !promptWaits || len(decoders) == 0 {
		p.decodeOwed = 0
	}
	// Decode is owed time after prefill steps; a waiting Chat or FIM
	// prompt is not made to wait it out (a newcomer waits one step).
	prefill := !(p.decodeOwed > 0 && !interactivePrompt)
	p.planPrefill(pl, now, decoders, prefill)
	p.beginDecodes(pl, len(decoders))
	for _, l := range decoders {
		if l.decodeStarved >= p.cfg.StarvationSteps {
			p.stats.starvationGrants.Add(1)
		}
		l.decodeStarved = 0
		p.addDecode(pl, l)
		p.stepInteractiveDecode = p.stepInteractiveDecode || l.job.watched()
	}
	p.finishDrafts(pl)
	if !pl.Empty() {
		p.stats.ticks.Add(1)
	}
	if p.stepInteractiveDecode || p.planCarries(pl, Class.interactive) {
		p.lastInteractive = now
	}
	if p.planCarries(pl, func(c Class) bool { return c == FIM }) {
		p.lastFIM = now
	}
	p.stepRows, p.stepDepth = p.planShape(pl)
	return pl
}

// planCarries reports whether the plan carries a prompt chunk or a token
// of a lane whose class is.
func (p *planner) planCarries(pl *engine.Plan, is func(Class) bool) bool {
	for i := range pl.Prefills {
		if l := p.find(pl.Prefills[i].Lane); l != nil && is(l.job.class) {
			return true
		}
	}
	for i := range pl.Decodes {
		if l := p.find(pl.Decodes[i].Lane); l != nil && is(l.job.class) {
			return true
		}
	}
	return false
}

// decoders is the lanes that put a token into this step: every lane whose
// prompt is in and that may still sample, but Agent and Background lanes
// on steps the background divisor skips (they count a starved step).
// Starving lanes first, then better classes, then older lanes.
func (p *planner) decoders() []*lane {
	cands := p.cands[:0]
	throttle := p.bgDivisor > 1 && p.steps%uint64(p.bgDivisor) != 0
	editorHold := p.shortFIMDecoding() // editor.go
	for _, l := range p.lanes {
		if l.finishing || !l.admitted || !l.decoding() || l.toGenerate() == 0 {
			continue
		}
		if !l.job.class.interactive() && (throttle || editorHold && l.decodeStarved < p.cfg.StarvationSteps) {
			l.decodeStarved++
			continue
		}
		cands = append(cands, l)
	}
	bound := p.cfg.StarvationSteps
	sortLanes(cands, func(a, b *lane) bool {
		as, bs := a.decodeStarved >= bound, b.decodeStarved >= bound
		if as != bs {
			return as
		}
		if a.job.class != b.job.class {
			return a.job.class < b.job.class
		}
		return a.tag < b.tag
	})
	p.cands = cands
	return cands
}

// promptsWaiting reports whether a running lane has prompt left, and
// whether one of them is a Chat or FIM lane's.
func (p *planner) promptsWaiting() (waiting, interactive bool) {
	for _, l := range p.lanes {
		if !l.finishing && !l.restoring && l.remaining() > 0 {
			waiting = true
			interactive = interactive || l.job.class.interactive()
		}
	}
	return waiting, interactive
}

// planPrefill adds the admits and, when prefill is true, the prompt chunks
// that fit beside the step's decoding lanes.
func (p *planner) planPrefill(pl *engine.Plan, now time.Time, decoders []*lane, prefill bool) {
	room := max(0, p.batch-len(decoders))
	budget, growMax := 0, 0
	if prefill {
		budget, growMax = p.stepPrefillBudget(room, decoders, now)
	}
	p.stats.prefillBudgetLive.Store(int64(budget))
	order := p.order[:0]
	for _, l := range p.lanes {
		if !l.finishing && !l.restoring {
			order = append(order, l)
		}
	}
	bound := p.cfg.StarvationSteps
	sortLanes(order, func(a, b *lane) bool {
		return rankOf(a.job.class, a.remaining(), a.tag, a.prefillStarved, bound).
			before(rankOf(b.job.class, b.remaining(), b.tag, b.prefillStarved, bound))
	})
	p.order = order
	b := newPrefillBudget(budget, room)
	b.growMax = growMax
	if prefill && p.holdForShortReply(now) {
		// A short reply someone reads token by token (an editor's
		// completion, a bounded chat answer) finishes before Agent and
		// Background prompts prefill again: a prefill step beside each of
		// its tokens would stretch it several-fold, for a gain to the
		// prompts of seconds at most.
		b.holdBelow(FIM)
	}
	if c, ok := bestWaitingPrompt(order); ok && c.interactive() {
		b.limitWorse(c)
	}
	for _, l := range order {
		if !l.admitted {
			j := l.job
			pl.AddAdmit(engine.Admit{
				Lane:          l.tag,
				Seq:           l.seq,
				Cached:        uint32(l.warm),
				MaxTokens:     uint32(j.maxTokens),
				Logprobs:      int32(j.logprobs),
				Grammar:       j.grammar,
				GrammarReplay: j.grammarReplay(),
				Sampling:      j.sampling,
			}, j.enginePrompt(), j.bias)
		}
		rem := l.remaining()
		if rem <= 0 || !prefill || l.job.adapters.key != p.stepSet.key {
			continue
		}
		if l.job.class.interactive() {
			// Someone is waiting on this prompt's first token: it takes
			// what the step has room for beside what earlier lanes took,
			// whatever the budget (so a prompt that fits the batch runs in
			// one step), and nothing of a worse class prefills beside it
			// (the seeds held back only in the step the prompt completes;
			// a FIM request under four long background prompts then paid
			// for their chunks too).
			b.grow(rem)
			b.holdBelow(l.job.class)
		}
		limit, span := l.chunkLimit()
		chunk := p.alignToCheckpoint(l.prefilled, b.offerTo(min(rem, limit), l.job.class), len(l.job.prompt))
		if chunk == 0 {
			continue
		}
		if span != nil {
			p.rowChunks = append(p.rowChunks, rowChunk{lane: l, span: span, from: l.prefilled, n: chunk})
		} else {
			pl.Prefills = append(pl.Prefills, engine.Prefill{Lane: l.tag, Offset: uint32(l.prefilled), Count: uint32(chunk)})
		}
		l.chunk = chunk
		l.prefillStarved = 0
		b.take(chunk, chunk == rem && !l.job.whole, l.job.class)
	}
	if !prefill {
		return
	}
	p.releaseServed(pl)
	// A lane counts a starved step only when a younger lane was served.
	var youngest uint32
	for i := range pl.Prefills {
		youngest = max(youngest, pl.Prefills[i].Lane)
	}
	served := len(pl.Prefills) > 0
	for _, l := range order {
		waiting := l.remaining() > 0 && l.chunk == 0
		l.prefillStarved = starvedAfter(l.prefillStarved, waiting, youngest, served, l.tag)
	}
}

// alignToCheckpoint ends a chunk starting at position at no later than the
// next multiple of the engine's checkpoint spacing. A sliding-window or
// recurrent model's engine checkpoints its partial state only where a
// step ends, and a prompt that later diverges from this one resumes from
// the last checkpoint before the divergence: a 1,400-token prompt taken in
// one step would leave a checkpoint at 1,400 only, and an edit at 1,190
// would find nothing. The chunks stay whole micro-batches at llama.cpp's
// default (512 both), so the step costs what it did. A recurrent model's
// chunk also ends checkpointTail tokens before the prompt's end (of n
// tokens), where the engine checkpoints, so the same prompt again resumes
// there rather than from the last multiple of the spacing.
func (p *planner) alignToCheckpoint(at, chunk, n int) int {
	if p.checkpointEvery <= 0 {
		return chunk
	}
	chunk = min(chunk, p.checkpointEvery-at%p.checkpointEvery)
	if tail := n - p.checkpointTail; p.checkpointTail > 0 && at < tail && tail < at+chunk {
		chunk = tail - at
	}
	return chunk
}

// stepPrefillBudget is the prompt tokens this step may carry (budget), and
// the most a Chat or FIM prompt may grow it to (growMax). Steps are sized
// by time, bounded by the batch's room beside the decoding lanes (and the
// fixed budget if one is set), at the learned cost for the depth of the
// deepest prompt left:
//
//   - open: while a newcomer could join after the step (here, or on another
//     engine sharing the arbiter) or a Chat or FIM lane decodes in it,
//     what fits joinWaitSecs beside the decoding rows; while another
//     engine runs Chat or FIM work, a step prefilling only Agent and
//     Background prompts fits interactiveWaitSecs instead, below the
//     64-token floor: every request of that person waits out the step in
//     flight. A Chat or FIM lane's reply waits out every step too, so a
//     Chat or FIM prompt grows the step only to the open bound beside it;
//     otherwise to the whole room.
//   - alone: one lane prefills and nothing else runs or waits (or nothing
//     could join: one lane, or every lane a Chat or FIM prompt), the
//     engine's efficient size: whole micro-batches within soloWaitSecs,
//     at least one.
//
// Either way, while this engine carried Chat or FIM work within the last
// interactiveWindow (a person at work here: an editor's next completion
// comes within seconds), a step prefilling only Agent and Background
// prompts fits interactiveWaitSecs, as beside another engine's. Until a
// step has taught the cost, one micro-batch.
func (p *planner) stepPrefillBudget(room int, decoders []*lane, now time.Time) (budget, growMax int) {
	budget = room
	if p.cfg.PrefillBudget > 0 {
		budget = min(budget, p.cfg.PrefillBudget)
	}
	if !p.prefillCost.known() {
		return min(budget, p.ubatch), room
	}
	var beside float64
	watchedDecodes := false // a reply someone reads token by token waits out this step
	for _, l := range decoders {
		beside += p.prefillCost.rowSecs(float64(l.npast))
		watchedDecodes = watchedDecodes || l.job.watched()
	}
	depth := p.deepestPrompt()
	joined, interactive := p.othersElsewhere()
	interactive = interactive || !p.lastInteractive.IsZero() && now.Sub(p.lastInteractive) < interactiveWindow
	growMax = room
	if !joined && !watchedDecodes && !(p.joinerWaits() && !p.alone()) {
		budget = min(budget, soloTokens(&p.prefillCost, depth, beside, p.ubatch))
	} else {
		budget = min(budget, joinWaitTokens(&p.prefillCost, depth, beside))
		if watchedDecodes {
			growMax = budget
		}
	}
	if interactive {
		if c, ok := bestWaitingPrompt(p.lanes); ok && !c.interactive() {
			budget = min(budget, interactiveWaitTokens(&p.prefillCost, depth, beside, p.worseWaitSecs(now)))
		}
	}
	return budget, growMax
}

// deepestPrompt is the most prompt tokens in the sequence of a lane with
// prompt left to prefill: the depth its next chunk starts at.
func (p *planner) deepestPrompt() int {
	d := 0
	for _, l := range p.lanes {
		if !l.finishing && !l.restoring && l.remaining() > 0 {
			d = max(d, l.prefilled)
		}
	}
	return d
}

// bestWaitingPrompt is the best class among lanes with prompt left.
func bestWaitingPrompt(lanes []*lane) (Class, bool) {
	best, ok := Class(0), false
	for _, l := range lanes {
		if l.remaining() > 0 && (!ok || l.job.class < best) {
			best, ok = l.job.class, true
		}
	}
	return best, ok
}

// holdForShortReply reports whether this step holds Agent and Background
// prefill back for a short reply. Replies that follow one another (an
// editor completing as someone types) would hold it back for good, so a
// hold that has lasted maxShortReplyHoldSecs is released until a worse
// class has prefilled once (a step that carries a Chat or FIM prompt holds
// them back for that prompt's sake and does not count).
func (p *planner) holdForShortReply(now time.Time) bool {
	if !p.shortReplyDecoding() {
		p.shortReplyHoldSince, p.shortReplyReleased = time.Time{}, false
		return false
	}
	if p.shortReplyReleased {
		return false
	}
	if p.shortReplyHoldSince.IsZero() {
		p.shortReplyHoldSince = now
	}
	if now.Sub(p.shortReplyHoldSince).Seconds() >= maxShortReplyHoldSecs {
		p.shortReplyReleased = true
		return false
	}
	return true
}

// releaseServed ends a short-reply release once a worse class prefilled.
func (p *planner) releaseServed(pl *engine.Plan) {
	if !p.shortReplyReleased {
		return
	}
	for i := range pl.Prefills {
		if l := p.find(pl.Prefills[i].Lane); l != nil && l.job.class > FIM {
			p.shortReplyHoldSince, p.shortReplyReleased = time.Time{}, false
			return
		}
	}
}

// shortReplyDecoding reports a Chat or FIM lane generating a reply that
// ends within shortReplySecs at the measured decode step time
// (shortReplyTokens while the time is unknown).
func (p *planner) shortReplyDecoding() bool {
	return p.replyEndingWithin(Class.interactive, shortReplySecs, shortReplyTokens)
}

// replyEndingWithin reports a decoding lane of a class of is whose reply
// ends within secs at the measured decode step time (tokens while the
// time is unknown).
func (p *planner) replyEndingWithin(of func(Class) bool, secs float64, tokens int) bool {
	for _, l := range p.lanes {
		if l.finishing || !l.admitted || !l.decoding() || !of(l.job.class) {
			continue
		}
		left := l.toGenerate()
		if left < 0 {
			continue
		}
		if p.decodeStepSecs > 0 && float64(left)*p.decodeStepSecs <= secs || p.decodeStepSecs <= 0 && left <= tokens {
			return true
		}
	}
	return false
}

// sortLanes is an insertion sort: lanes are few, and it allocates nothing.
func sortLanes(s []*lane, before func(a, b *lane) bool) {
	for i := 1; i < len(s); i++ {
		for k := i; k > 0 && before(s[k], s[k-1]); k-- {
			s[k], s[k-1] = s[k-1], s[k]
		}
	}
}
