package kv

import (
	"cmp"
	"slices"

	"superfluid/engine"
)

// Namespaces: a stream computed under LoRA adapters is keyed in its
// adapter set's namespace (the scheduler tags its tokens so, one namespace
// per set; sched/lora.go), and a stream's namespace shows in its first
// token. The cache parks such a stream like any other, its file naming
// the set (park.Store.PutSet), and restores a parked stream only while
// its namespace names the set its file names: a namespace the owner gave
// to another set since — in this process, or in the one that parked it —
// never seeds a prompt from the old set's file.

// Namespaces names the adapter set of a namespace of the cache's keys.
type Namespaces interface {
	// SetOf is the adapter set whose namespace a stream beginning with
	// first is keyed in (zero: the base model); false when that namespace
	// names no set now, and the stream is then neither parked nor
	// restored.
	SetOf(first engine.Token) (engine.AdapterSetID, bool)
}

// UseNamespaces makes n name the adapter sets of the cache's namespaces;
// without it every stream is the base model's. Owner goroutine.
func (c *Cache) UseNamespaces(n Namespaces) { c.spaces = n }

// setOf is the set n's stream was computed under.
func (c *Cache) setOf(n *node) (engine.AdapterSetID, bool) {
	first, ok := firstToken(n)
	if !ok || c.spaces == nil {
		return engine.AdapterSetID{}, ok
	}
	return c.spaces.SetOf(first)
}

// parkable reports whether n's stream may be parked: its namespace names
// a set.
func (c *Cache) parkable(n *node) bool {
	_, ok := c.setOf(n)
	return ok
}

// firstToken is the first token of n's stream; false for the root.
func firstToken(n *node) (engine.Token, bool) {
	at := n
	for at.parent != nil && at.parent.parent != nil {
		at = at.parent
	}
	if at.parent == nil || len(at.edge) == 0 {
		return 0, false
	}
	return at.edge[0], true
}

// ParkedSet is an adapter set some parked stream was computed under and
// the first token of one such stream, which says the namespace it was
// keyed in.
type ParkedSet struct {
	Set   engine.AdapterSetID
	First engine.Token
}

// ParkedSets lists each distinct (set, first token) pair of the parked
// streams, those used most recently first: after a restart the owner
// gives each set the namespace its files were keyed in, so they restore.
// Owner goroutine.
func (c *Cache) ParkedSets() []ParkedSet {
	seen := map[ParkedSet]uint64{}
	for _, p := range c.parked {
		first, ok := firstToken(p.node)
		if !ok || p.set.IsBase() {
			continue
		}
		k := ParkedSet{Set: p.set, First: first}
		seen[k] = max(seen[k], p.used)
	}
	out := make([]ParkedSet, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b ParkedSet) int { return cmp.Compare(seen[b], seen[a]) })
	return out
}

// DropNamespace drops every entry — resident, in host memory, parked (its
// file removed) — whose stream begins with a token in returns true for:
// the owner is giving that namespace to another set, and nothing keyed
// under the old one may seed the new one's prompts. Sequences leased to
// lanes are the lanes'; the owner gives a namespace away only when no lane
// of it runs. Owner goroutine.
func (c *Cache) DropNamespace(in func(first engine.Token) bool) {
	inNS := func(n *node) bool {
		first, ok := firstToken(n)
		return ok && in(first)
	}
	for seq, e := range c.entries {
		if inNS(e.node) {
			e.node.resident = nil
			delete(c.entries, seq)
			c.freeSeq(seq)
			c.tree.prune(e.node)
		}
	}
	for _, h := range append([]*hostEntry(nil), c.host.entries...) {
		if inNS(h.node) {
			c.host.remove(&c.tree, h)
		}
	}
	for _, p := range c.parked {
		if inNS(p.node) {
			if c.park != nil {
				c.park.Remove(p.node.path())
			}
			c.dropPark(p)
		}
	}
	c.publishGauges()
}
