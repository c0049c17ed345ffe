package kv

import (
	"log/slog"
	"slices"

	"superfluid/engine"
)

// Partial state (engine.PartialCuts). A sliding-window model's cells leave
// the window and a hybrid model's recurrent state exists only at a
// stream's end, so a cached stream cannot always be cut where a prompt
// leaves it. The cache cuts only where the engine says a cut is valid
// (MinCut); elsewhere it resumes from the stream's last checkpoint at or
// before the divergence — the partial state the engine took as the
// stream was prefilled, kept with the entry in host memory — and where
// there is none it falls back to a shorter prefix or a cold prefill,
// counted (Stats.CutRefusals). A request is never failed for it.
//
// Checkpoints follow their stream: a lane seeded from an entry inherits
// the entry's checkpoints up to the seed, adds those the engine took of
// its own prompt, and publishes them all with its stream; an evicted
// entry's go with it to host memory.

// maxEntryCheckpoints bounds the checkpoints one entry keeps (the engine
// keeps its own CheckpointMax per sequence; inherited ones add to those).
const maxEntryCheckpoints = 32

// residentBudget is the bound enforceBudget holds idle resident entries
// to (0: none); the conversation being served stays over it, on every
// family. A sliding-window model's have their own bound
// (MaxWindowResidentTokens): moved out of the pool an entry keeps only
// its last window (an export holds no cell that left it), and a prompt
// leaving it further back resumes only from a checkpoint, where resident
// it can be cut anywhere its cells still cover (MinCut). The others
// leave: every cell in use costs each later step's attention, and a pool
// left full makes steps fail and be retried (issue 22).
func (c *Cache) residentBudget() int {
	if c.eng.Descriptor().Partial == engine.PartialSWA {
		return c.cfg.MaxWindowResidentTokens
	}
	return c.cfg.MaxResidentTokens
}

// admitted holds idle entries to their budget as seq's prompt is
// admitted, the entry it was seeded from excepted. Publishing spares the
// conversation's own entries, so that its next turn or edit finds them in
// the pool; once another conversation's prompt arrives they leave it like
// any idle one. Every resident cell widens each later step's attention:
// llama-server (--cache-idle-slots, its default, with --kv-unified) saves
// idle slots to host memory and clears them as a new task starts, and a
// gemma4 prompt beside the earlier conversations' cells took 1.35× its
// time (issue 22).
func (c *Cache) admitted(seq int32) {
	before := c.stats.Evictions.Load()
	c.enforceBudget(c.seededFrom[seq])
	if c.stats.Evictions.Load() != before {
		c.publishGauges()
	}
}

// cutter returns the engine's cuts, nil when every cut is valid.
func (c *Cache) cutter() engine.PartialCuts {
	if c.eng.Descriptor().Partial == engine.PartialNone {
		return nil
	}
	pc, _ := c.eng.(engine.PartialCuts)
	return pc
}

// cutValid reports whether seq, holding more than keep tokens, may be cut
// (or copied) to keep tokens.
func (c *Cache) cutValid(seq int32, keep int) bool {
	pc := c.cutter()
	return pc == nil || keep >= pc.MinCut(seq)
}

// latestCheckpoint is the last checkpoint at or before depth.
func latestCheckpoint(cps []engine.Checkpoint, depth int) (engine.Checkpoint, bool) {
	for i := len(cps) - 1; i >= 0; i-- {
		if cps[i].Pos > 0 && cps[i].Pos <= depth {
			return cps[i], true
		}
	}
	return engine.Checkpoint{}, false
}

// checkpointsUpTo returns the checkpoints at or before depth (shared, not
// copied: checkpoints are never modified).
func checkpointsUpTo(cps []engine.Checkpoint, depth int) []engine.Checkpoint {
	i := len(cps)
	for i > 0 && cps[i-1].Pos > depth {
		i--
	}
	return cps[:i:i]
}

// mergeCheckpoints joins two ascending lists, b winning on an equal Pos
// (the newer state of the same stream), keeping the last max.
func mergeCheckpoints(a, b []engine.Checkpoint, max int) []engine.Checkpoint {
	if len(a) == 0 && len(b) <= max {
		return b
	}
	out := make([]engine.Checkpoint, 0, len(a)+len(b))
	out = append(out, a...)
	for _, cp := range b {
		i, found := slices.BinarySearchFunc(out, cp.Pos, func(x engine.Checkpoint, p int) int { return x.Pos - p })
		if found {
			out[i] = cp
		} else {
			out = slices.Insert(out, i, cp)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

func checkpointBytes(cps []engine.Checkpoint) int64 {
	var n int64
	for _, cp := range cps {
		n += int64(len(cp.Blob))
	}
	return n
}

// resumeAt makes seq, which holds more than depth tokens of the stream
// cps were taken of, hold its first depth tokens or fewer: cut there when
// that is valid, else resumed at the last checkpoint before it. It
// returns how many tokens seq holds (0: none, seq emptied: the caller
// prefills cold) and counts the fallbacks.
func (c *Cache) resumeAt(seq int32, depth int, cps []engine.Checkpoint) int {
	if c.cutValid(seq, depth) {
		if err := c.eng.Truncate(seq, depth); err != nil {
			slog.Warn("prefix cache: cutting a restored stream failed, admitting cold", "err", err)
			c.eng.Free(seq)
			c.stats.CutRefusals.Add(1)
			return 0
		}
		return depth
	}
	return c.resumeFromCheckpoint(seq, depth, cps)
}

// resumeFromCheckpoint resumes seq (holding at least the checkpoint's
// tokens of its stream) at the last checkpoint at or before depth.
func (c *Cache) resumeFromCheckpoint(seq int32, depth int, cps []engine.Checkpoint) int {
	cp, ok := latestCheckpoint(cps, depth)
	if !ok {
		c.eng.Free(seq)
		c.stats.CutRefusals.Add(1)
		return 0
	}
	if err := c.cutter().RestoreCheckpoint(seq, cp); err != nil {
		slog.Warn("prefix cache: a checkpoint was refused, admitting cold", "pos", cp.Pos, "err", err)
		c.eng.Free(seq)
		c.stats.CutRefusals.Add(1)
		return 0
	}
	c.stats.CheckpointResumes.Add(1)
	return cp.Pos
}

// sound is the last check before a seeded sequence goes to a lane: it
// holds exactly the tokens the seed says and can be continued there. A
// seed that fails it (an engine whose state disagrees with what the cache
// believed) is emptied, its inherited checkpoints forgotten, and the lane
// prefills cold, counted: never a request failed at admission.
func (c *Cache) sound(seq int32, cached int) bool {
	if cached == 0 {
		return true
	}
	ok := c.eng.SeqLen(seq) == cached
	if pc := c.cutter(); ok && pc != nil {
		ok = pc.MinCut(seq) <= cached
	}
	if !ok {
		slog.Warn("prefix cache: a seeded sequence does not hold what the seed says; admitting cold", "seq", seq, "cached", cached, "holds", c.eng.SeqLen(seq))
		c.eng.Free(seq)
		delete(c.inherit, seq) // its checkpoints went with it
		c.stats.SeedMismatches.Add(1)
	}
	return ok
}

// takeCheckpoints collects what seq's stream of n tokens carries: the
// checkpoints its seed inherited and those the engine took as it
// prefilled. It chooses by position first and copies out of the engine
// only the checkpoints it keeps: a lane may hold up to CheckpointMax of
// them, megabytes each, and the thinning drops many.
func (c *Cache) takeCheckpoints(seq int32, n int) []engine.Checkpoint {
	inherited := c.inherit[seq]
	delete(c.inherit, seq)
	pc := c.cutter()
	if pc == nil {
		return nil
	}
	pos, err := pc.CheckpointPositions(seq)
	if err != nil {
		slog.Warn("prefix cache: listing checkpoints failed", "err", err)
	}
	own := make([]engine.Checkpoint, len(pos)) // positions only, for the choice
	for i, p := range pos {
		own[i].Pos = p
	}
	kept := keptCheckpoints(inherited, own, n, c.eng.Descriptor().CheckpointEvery/2)
	var want []int
	for _, cp := range kept {
		if slices.Contains(pos, cp.Pos) { // own ones win a tie (mergeCheckpoints)
			want = append(want, cp.Pos)
		}
	}
	taken, err := pc.TakeCheckpoints(seq, want)
	if err != nil {
		slog.Warn("prefix cache: taking checkpoints failed", "err", err)
	}
	c.stats.CheckpointBytesCopied.Add(checkpointBytes(taken))
	slog.Debug("prefix cache: checkpoints of a retiring lane", "seq", seq, "engine_took", len(pos), "copied", len(taken), "bytes", checkpointBytes(taken))
	out := make([]engine.Checkpoint, 0, len(kept))
	for _, cp := range kept {
		if slices.Contains(pos, cp.Pos) {
			i := slices.IndexFunc(taken, func(t engine.Checkpoint) bool { return t.Pos == cp.Pos })
			if i < 0 {
				continue // not handed over: a divergence there falls back further
			}
			cp = taken[i]
		}
		out = append(out, cp)
	}
	return out
}

// keptCheckpoints is the choice takeCheckpoints makes: a stream of n
// tokens keeps its inherited and own checkpoints (own winning a tie) up
// to n, at most maxEntryCheckpoints, thinned to gap.
func keptCheckpoints(inherited, own []engine.Checkpoint, n, gap int) []engine.Checkpoint {
	return thinCheckpoints(checkpointsUpTo(mergeCheckpoints(inherited, own, maxEntryCheckpoints), n), gap)
}

// thinCheckpoints drops checkpoints less than gap after the one kept
// before them, keeping the last: a conversation of many short turns
// leaves one at every turn's end, and a checkpoint costs as much as
// hundreds of tokens of the stream itself (SF_CKPT_EVERY in native/), so
// a stream keeps at most about two per CheckpointEvery tokens, and its last.
func thinCheckpoints(cps []engine.Checkpoint, gap int) []engine.Checkpoint {
	if gap <= 0 || len(cps) < 2 {
		return cps
	}
	out := make([]engine.Checkpoint, 0, len(cps))
	for i, cp := range cps {
		// The last stays whatever its gap: the latest turn's end, where
		// the next turn most likely leaves the stream.
		if len(out) > 0 && cp.Pos-out[len(out)-1].Pos < gap && i != len(cps)-1 {
			continue
		}
		out = append(out, cp)
	}
	return out
}
