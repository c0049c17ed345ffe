package sched

import (
	"time"

	"superfluid/engine"
)

// buildPlan plans the next tick: retires of finished and preempted lanes,
// admits of lanes bound since the last tick, prefill chunks under the
// tick's budget, and decode grants. The plan is reused across ticks: a
// steady-state tick allocates nothing.
func (p *planner) buildPlan(now time.Time) *engine.Plan {
	pl := &p.plan
	pl.Reset()
	p.tickPrefillTokens, p.tickPrefillLanes, p.tickDecodeLanes = 0, 0, 0
	if len(p.lanes) == 0 {
		return pl
	}
	p.tick++
	finishing := false
	for _, l := range p.lanes {
		l.chunk = 0
		if l.finishing {
			pl.Retires = append(pl.Retires, l.tag)
			finishing = true
		}
	}
	p.planPrefill(pl, now)
	p.planDecode(pl, finishing)
	if !pl.Empty() {
		p.stats.ticks.Add(1)
	}
	return pl
}

// planPrefill adds the admits and the prefill chunks.
func (p *planner) planPrefill(pl *engine.Plan, now time.Time) {
	budget := p.tickPrefillBudget(p.joinerWaits(), now)
	// The first step carries every chunk beside one token per decoding
	// lane, and must fit the engine's batch.
	decoding := 0
	order := p.order[:0]
	for _, l := range p.lanes {
		if l.finishing {
			continue
		}
		if l.admitted && l.decoding() {
			decoding++
		}
		order = append(order, l)
	}
	budget = max(0, min(budget, p.batch-decoding))
	p.stats.prefillBudgetLive.Store(int64(budget))
	bound := p.cfg.StarvationTicks
	sortLanes(order, func(a, b *lane) bool {
		return rankOf(a.job.class, a.remaining(), a.tag, a.prefillStarved, bound).
			before(rankOf(b.job.class, b.remaining(), b.tag, b.prefillStarved, bound))
	})
	b := newPrefillBudget(budget, p.batch-decoding)
	if p.holdForShortReply(now) {
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
			}, j.prompt, j.bias)
		}
		rem := l.remaining()
		if rem <= 0 {
			continue
		}
		p.tickPrefillLanes++
		if l.job.class.interactive() {
			// Someone is waiting on this prompt's first token: it takes a
			// whole chunk even in a short open tick, as far as the step
			// has room beside what earlier lanes took (the budget's room),
			// and nothing of a worse class prefills beside it (the seeds
			// held back only in the tick the prompt completes; a FIM
			// request under four long background prompts then paid for
			// their chunks too).
			b.grow(min(rem, interactiveChunk))
			b.holdBelow(l.job.class)
		}
		chunk := b.offerTo(rem, l.job.class)
		if chunk == 0 {
			continue
		}
		pl.Prefills = append(pl.Prefills, engine.Prefill{Lane: l.tag, Offset: uint32(l.prefilled), Count: uint32(chunk)})
		l.chunk = chunk
		l.prefillStarved = 0
		p.tickPrefillTokens += chunk
		b.take(chunk, chunk == rem, l.job.class)
	}
	p.order = order
	p.tickPrefillLanes += p.queued()
	// A lane counts a starved tick only when a younger lane was served.
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

// holdForShortReply reports whether this tick holds Agent and Background
// prefill back for a short reply. Replies that follow one another (an
// editor completing as someone types) would hold it back for good, so a
// hold that has lasted maxShortReplyHoldSecs lets one tick through.
func (p *planner) holdForShortReply(now time.Time) bool {
	if !p.shortReplyDecoding() {
		p.shortReplyHoldSince = time.Time{}
		return false
	}
	if p.shortReplyHoldSince.IsZero() {
		p.shortReplyHoldSince = now
	}
	if now.Sub(p.shortReplyHoldSince).Seconds() >= maxShortReplyHoldSecs {
		p.shortReplyHoldSince = time.Time{}
		return false
	}
	return true
}

// shortReplyDecoding reports a Chat or FIM lane generating a reply that
// ends within shortReplySecs at the measured round time (shortReplyTokens
// while the time is unknown).
func (p *planner) shortReplyDecoding() bool {
	for _, l := range p.lanes {
		if l.finishing || !l.admitted || !l.decoding() || !l.job.class.interactive() {
			continue
		}
		left := l.toGenerate()
		if left < 0 {
			continue
		}
		if p.roundSecs > 0 && float64(left)*p.roundSecs <= shortReplySecs || p.roundSecs <= 0 && left <= shortReplyTokens {
			return true
		}
	}
	return false
}

// tickPrefillBudget is the prompt tokens this tick may carry. A tick a
// newcomer could join after takes what fits the open-tick target at the
// learned rate (one chunk until two bulk ticks taught it); a lone lane with
// nothing queued takes what fits a long tick; otherwise the adaptive budget,
// capped at what fits maxPrefillTickSecs.
func (p *planner) tickPrefillBudget(open bool, now time.Time) int {
	bulk := p.prefillSPTBulk
	if open {
		spt := max(bulk, p.prefillSPTLast)
		limit := openPrefillUnlearned
		if spt > 0 && p.prefillRateSamples >= 2 {
			// superfluid's engine yields at its next step when a Chat or
			// FIM request arrives.
			limit = openPrefillTickCap(spt, openPrefillTickTarget(true, p.latencySensitive(now)))
		}
		return min(p.prefillBudget, limit)
	}
	if bulk <= 0 {
		return p.prefillBudget
	}
	alone := len(p.lanes) == 1 && p.queued() == 0
	if alone && !p.prefillFixed && !p.lanes[0].decoding() {
		if limit := int(clampF(maxPrefillTickSecs/bulk, 512, soloPrefillBudget)); limit > p.prefillBudget {
			return limit
		}
	}
	lone := alone && p.lanes[0].remaining() > prefillTickCap(bulk, true)
	return min(p.prefillBudget, prefillTickCap(bulk, lone))
}

// planDecode grants decode rounds: starving lanes first, then better
// classes, then older lanes.
func (p *planner) planDecode(pl *engine.Plan, finishing bool) {
	cands := p.cands[:0]
	interactive := false
	firstOut := -1
	for _, l := range p.order {
		if l.prefilled+l.chunk < len(l.job.prompt) || l.toGenerate() == 0 {
			continue
		}
		cands = append(cands, l)
		interactive = interactive || l.job.class.interactive()
		if left := l.toGenerate(); left >= 0 && (firstOut < 0 || left < firstOut) {
			firstOut = left
		}
	}
	bound := p.cfg.StarvationTicks
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
	target := tickTarget(&nativeTicks, p.cfg.TickTarget.Seconds(), len(p.lanes), p.cfg.Lanes, finishing)
	p.stats.tickTargetMS.Store(int64(target * 1000))
	grant := decodeGrant(&nativeTicks, grantInputs{
		roundSecs:      p.roundSecs,
		prefillSecs:    p.prefillSPT * float64(p.tickPrefillTokens),
		prefilling:     len(pl.Prefills) > 0,
		interactive:    interactive,
		targetSecs:     target,
		firstOut:       firstOut,
		haveCandidates: len(cands) > 0,
	})
	p.stats.decodeGrantLive.Store(int64(grant))
	left := p.cfg.DecodeBudget
	if left == 0 {
		left = p.cfg.Lanes * grant
	}
	throttle := p.bgDivisor > 1 && p.tick%uint64(p.bgDivisor) != 0
	for _, l := range cands {
		want := 0
		if !(throttle && !l.job.class.interactive()) {
			want = min(grant, left)
			if g := l.toGenerate(); g >= 0 {
				want = min(want, g)
			}
		}
		if want <= 0 {
			l.decodeStarved++
			continue
		}
		if l.decodeStarved >= bound {
			p.stats.starvationGrants.Add(1)
		}
		l.decodeStarved = 0
		left -= want
		pl.Decodes = append(pl.Decodes, engine.Decode{Lane: l.tag, Rounds: uint32(want)})
	}
	p.tickDecodeLanes = len(pl.Decodes)
}

// sortLanes is an insertion sort: lanes are few, and it allocates nothing.
func sortLanes(s []*lane, before func(a, b *lane) bool) {
	for i := 1; i < len(s); i++ {
		for k := i; k > 0 && before(s[k], s[k-1]); k-- {
			s[k], s[k-1] = s[k-1], s[k]
		}
	}
}
