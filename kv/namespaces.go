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

// UseNamespaces makes setOf name the adapter set whose namespace a stream
// beginning with first is keyed in (zero: the base model), false when that
// namespace names no set now — such a stream is then neither parked nor
// restored. Without it every stream is the base model's. Owner goroutine.
func (c *Cache) UseNamespaces(setOf func(first engine.Token) (engine.AdapterSetID, bool)) {
	c.spaces = setOf
}

// setOf is the set n's stream was computed under.
func (c *Cache) setOf(n *node) (engine.AdapterSetID, bool) {
	first, ok := firstToken(n)
	if !ok || c.spaces == nil {
		return engine.AdapterSetID{}, ok
	}
	return c.spaces(first)
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

// EachParkedSet calls f with each distinct (set, first token) pair of the
// parked streams computed under adapters, those used most recently first:
// the first token says which namespace the set's streams were keyed in, so
// that after a restart the owner gives the set that namespace again and
// its files restore. Owner goroutine.
func (c *Cache) EachParkedSet(f func(set engine.AdapterSetID, first engine.Token)) {
	type key struct {
		set   engine.AdapterSetID
		first engine.Token
	}
	seen := map[key]uint64{}
	for _, p := range c.parked {
		first, ok := firstToken(p.node)
		if !ok || p.set.IsBase() {
			continue
		}
		k := key{p.set, first}
		seen[k] = max(seen[k], p.used)
	}
	keys := make([]key, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Compare(seen[b], seen[a]) })
	for _, k := range keys {
		f(k.set, k.first)
	}
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
