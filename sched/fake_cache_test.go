package sched

import (
	"errors"
	"slices"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// fakeCache is a prefix cache over the fake engine's sequences: a list of
// published token streams, each on its own sequence. It checks the
// contract the scheduler must keep: a released sequence holds exactly the
// tokens Release names.
type fakeCache struct {
	t       testing.TB
	eng     *enginetest.Fake
	free    []int32
	entries []*cacheEntry
	now     int

	acquireErr error // Acquire fails with it while set
	acquires   int
	hits       int // acquires that found a prefix
	releases   int
}

type cacheEntry struct {
	seq    int32
	tokens []engine.Token
	used   int
}

func newFakeCache(t testing.TB, e *enginetest.Fake) *fakeCache {
	c := &fakeCache{t: t, eng: e}
	for s := e.Descriptor().Seqs - 1; s >= 0; s-- {
		c.free = append(c.free, int32(s))
	}
	return c
}

func (c *fakeCache) Acquire(tokens []engine.Token) (int32, int, error) {
	c.now++
	c.acquires++
	if c.acquireErr != nil {
		return 0, 0, c.acquireErr
	}
	var best *cacheEntry
	n := 0
	for _, e := range c.entries {
		if k := min(commonPrefix(tokens, e.tokens), len(tokens)-1); k > n {
			best, n = e, k
		}
	}
	if len(c.free) == 0 {
		victim := c.lru(best)
		if victim == nil && best != nil {
			// The only entry is the one we want: hand its sequence over.
			c.remove(best)
			_ = c.eng.Truncate(best.seq, n)
			c.hits++
			return best.seq, n, nil
		}
		if victim == nil {
			return 0, 0, errors.New("fake cache: no free sequence")
		}
		c.evict(victim)
	}
	seq := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	if c.eng.SeqLen(seq) != 0 {
		c.t.Errorf("fake cache: free sequence %d holds %d tokens", seq, c.eng.SeqLen(seq))
	}
	if best != nil && n > 0 {
		best.used = c.now
		if err := c.eng.CopyPrefix(best.seq, seq, n); err != nil {
			c.t.Errorf("fake cache: copy prefix: %v", err)
		}
		c.hits++
	}
	return seq, n, nil
}

func (c *fakeCache) Release(seq int32, tokens []engine.Token) {
	c.now++
	c.releases++
	if held := c.eng.Seq(seq); !heldEqual(held, untag(tokens, c.eng.Descriptor().Vocab)) {
		c.t.Errorf("fake cache: released sequence %d holds %d tokens, Release names %d (or different ones)", seq, len(held), len(tokens))
		_ = c.eng.Free(seq)
		c.free = append(c.free, seq)
		return
	}
	if owner, ok := c.eng.SeqOwner(seq); ok {
		c.t.Errorf("fake cache: released sequence %d still carries lane %d", seq, owner)
	}
	if len(tokens) == 0 {
		c.free = append(c.free, seq)
		return
	}
	for _, e := range slices.Clone(c.entries) {
		if len(e.tokens) <= len(tokens) && commonPrefix(e.tokens, tokens) == len(e.tokens) {
			c.evict(e) // the new entry covers it
		}
	}
	c.entries = append(c.entries, &cacheEntry{seq: seq, tokens: tokens, used: c.now})
}

func (c *fakeCache) Relieve() bool {
	v := c.lru(nil)
	if v == nil {
		return false
	}
	c.evict(v)
	return true
}

// lru is the least recently used entry other than keep.
func (c *fakeCache) lru(keep *cacheEntry) *cacheEntry {
	var v *cacheEntry
	for _, e := range c.entries {
		if e != keep && (v == nil || e.used < v.used) {
			v = e
		}
	}
	return v
}

func (c *fakeCache) evict(e *cacheEntry) {
	c.remove(e)
	_ = c.eng.Free(e.seq)
	c.free = append(c.free, e.seq)
}

func (c *fakeCache) remove(e *cacheEntry) {
	c.entries = slices.DeleteFunc(c.entries, func(x *cacheEntry) bool { return x == e })
}

// heldEqual compares a sequence's cells with untagged key tokens; a media
// key position (mediaRow) holds any row token.
func heldEqual(held, want []engine.Token) bool {
	if len(held) != len(want) {
		return false
	}
	for i := range held {
		if want[i] != mediaRow && held[i] != want[i] {
			return false
		}
	}
	return true
}

// mediaRow stands for a media key token in untag's output.
const mediaRow engine.Token = -1

// untag is tokens as the engine holds them: a LoRA set's namespace
// (lora.go's -(1 + t + vocab × ns)) taken off; media key tokens (media.go)
// become mediaRow.
func untag(tokens []engine.Token, vocab int) []engine.Token {
	out := make([]engine.Token, len(tokens))
	for i, t := range tokens {
		if t <= -mediaKeyBase {
			out[i] = mediaRow
			continue
		}
		if t < 0 {
			t = engine.Token((-int64(t) - 1) % int64(vocab))
		}
		out[i] = t
	}
	return out
}

// The fake keeps no parked streams; it drops a namespace's entries as
// kv's cache does (NamespacedCache).
func (c *fakeCache) UseNamespaces(func(engine.Token) (engine.AdapterSetID, bool)) {}

func (c *fakeCache) EachParkedSet(func(engine.AdapterSetID, engine.Token)) {}

func (c *fakeCache) DropNamespace(in func(first engine.Token) bool) {
	for _, e := range slices.Clone(c.entries) {
		if len(e.tokens) > 0 && in(e.tokens[0]) {
			c.evict(e)
		}
	}
}
