package kv

import (
	"errors"
	"fmt"
	"log/slog"

	"superfluid/engine"
)

// An edit's hand-over (handsOver) moves a conversation's stream out of the
// pool but for the prefix the edited prompt keeps, which stays resident.
// Copying the whole stream out put that prefix's cells — most of the
// stream — on the edit's way to its first token: 8–13 ms of a
// 2,000-token conversation's edit on synth qwen3 small, where llama-server
// just drops its slot's tail (issue 22). Where the engine can take a
// stream apart (engine.TailState), only the part cut goes to host memory,
// as a tail entry (hostEntry.base > 0): at a hand-over, and at any
// eviction that cuts an entry back to a prefix the pool keeps (evict: a
// shared prefix, a pin, readyBase's hand-over the other way). Seeding a
// prompt from it needs its base, the stream's first base tokens, from an
// entry that still holds them: a resident one through them (the edited
// conversation usually), else a host entry through them that can be put
// together itself (baseOf). A tail whose base has gone from both tiers
// seeds nothing: it is passed over and dropped (candidates). One that
// goes to disk (pushed out of host memory, idle, or the server stopping)
// is made whole first, as park files hold whole streams only.

// maxTailChain bounds how many tails deep a tail's base is looked for
// (baseOf): each level is an edit further back of an edited conversation.
const maxTailChain = 4

// errNoBase means a tail entry's base is held by no resident or whole host
// entry any more, nor by a tail that is.
var errNoBase = errors.New("kv: the prefix a tail continues is no longer cached")

// exportTail moves e's stream past depth to host memory as a tail entry,
// leaving e whole (the caller cuts it); false when the engine cannot take
// e apart, the prefix is shorter than a shared one worth keeping (a
// template's opening: the tail would save nothing and hang on it), or
// host memory cannot hold the tail, and nothing was moved.
func (c *Cache) exportTail(e *entry, depth int) bool {
	if !c.cutsTail(e, depth) {
		return false
	}
	blob, err := c.tails().ExportTail(e.seq, depth, nil)
	if err != nil {
		slog.Debug("prefix cache: no tail export, exporting the whole stream", "err", err)
		return false
	}
	h := &hostEntry{node: e.node, blob: blob, base: depth, ckpts: e.ckpts, used: c.clock, touched: e.touched}
	if !c.host.fits(int(h.size())) {
		return false
	}
	c.host.add(&c.tree, h)
	c.stats.HostExports.Add(1)
	c.stats.HostTails.Add(1)
	return true
}

// cutsTail reports whether e's stream past depth would leave as a tail
// (exportTail), not whole.
func (c *Cache) cutsTail(e *entry, depth int) bool {
	return c.tails() != nil && depth >= max(1, c.cfg.MinSharedTokens) && depth < e.node.depth
}

// tails is the engine's tail state, nil where streams are not taken
// apart: an engine without it, or a model with partial state.
func (c *Cache) tails() engine.TailState {
	if c.eng.Descriptor().Partial != engine.PartialNone {
		return nil
	}
	ts, _ := c.eng.(engine.TailState)
	return ts
}

// readyBase returns the resident entry holding the prefix tail h
// continues, cut back to it first (a hand-over the other way: its own
// tail goes to host memory), so that h's cells take the ones its tail
// frees instead of landing above them; nil when no resident entry holds
// the prefix. Left whole, the entry an edit published widened the steps
// of the original's next turn by the edit's cells: 6% of its prompt time,
// 2,000 tokens on synth qwen3 small.
func (c *Cache) readyBase(h *hostEntry) *entry {
	r, _ := c.baseOf(h, nil)
	if r != nil && r.node.depth > h.base && c.pinned()[r.node] <= h.base && c.exportable(r) {
		c.evict(r, c.nodeAt(r.node, h.base))
		if c.entries[r.seq] != r {
			r, _ = c.baseOf(h, nil)
		}
	}
	return r
}

// baseOf finds what gives tail h its first h.base tokens: the most
// recently used resident entry through them (their cells are copied),
// else a host entry through them that can itself be put together — a
// whole stream, or a tail whose own base is found (an edit of an edited
// conversation cuts below the prefix the first edit's tail continues);
// nil, nil when nothing can. chain are the tails already on the way,
// never taken again.
func (c *Cache) baseOf(h *hostEntry, chain map[*hostEntry]bool) (*entry, *hostEntry) {
	var res *entry
	var whole *hostEntry
	var tails []*hostEntry
	var walk func(*node)
	walk = func(at *node) {
		if e := at.resident; e != nil && (res == nil || e.used > res.used) {
			res = e
		}
		if w := at.host; w != nil && w != h && !chain[w] {
			if w.base == 0 && (whole == nil || w.used > whole.used) {
				whole = w
			} else if w.base > 0 {
				tails = append(tails, w)
			}
		}
		for _, ch := range at.children {
			walk(ch)
		}
	}
	walk(nodeThrough(h.node, h.base))
	switch {
	case res != nil:
		return res, nil
	case whole != nil:
		return nil, whole
	}
	if len(chain) >= maxTailChain {
		return nil, nil
	}
	next := chainWith(chain, h)
	for _, w := range tails {
		if r, hw := c.baseOf(w, next); r != nil || hw != nil {
			return nil, w
		}
	}
	return nil, nil
}

// nodeThrough is the node on n's path whose edge holds its depth-th token:
// every stream at or below it shares n's first depth tokens.
func nodeThrough(n *node, depth int) *node {
	for n.parent != nil && n.parent.parent != nil && n.parent.depth >= depth {
		n = n.parent
	}
	return n
}

// chainWith is chain with h added, a copy: each branch of the search
// keeps its own.
func chainWith(chain map[*hostEntry]bool, h *hostEntry) map[*hostEntry]bool {
	next := make(map[*hostEntry]bool, len(chain)+1)
	for w := range chain {
		next[w] = true
	}
	next[h] = true
	return next
}

// holdChain holds in host memory the entries tail h is put back onto when
// no resident entry holds its prefix, while the pool makes room for it.
func (c *Cache) holdChain(h *hostEntry) {
	for at := h; at.base > 0; {
		r, w := c.baseOf(at, c.host.held)
		if r != nil || w == nil {
			return
		}
		c.host.held[w] = true
		at = w
	}
}

// importHost makes the empty seq hold h's whole stream and returns its
// length, and for a tail the resident entry whose cells seq now shares
// (nil when its prefix came from host memory); on failure seq is empty.
func (c *Cache) importHost(seq int32, h *hostEntry) (int, *entry, error) {
	return c.rebuild(seq, h, nil)
}

// rebuild is importHost for a tail reached through chain (see baseOf).
func (c *Cache) rebuild(seq int32, h *hostEntry, chain map[*hostEntry]bool) (int, *entry, error) {
	if h.base == 0 {
		n, err := c.eng.Import(seq, h.blob)
		return n, nil, err
	}
	ts := c.tails()
	if ts == nil {
		return 0, nil, errors.New("kv: a tail entry on an engine without tails")
	}
	res, w := c.baseOf(h, chain)
	var err error
	switch {
	case res != nil:
		err = c.eng.CopyPrefix(res.seq, seq, h.base)
	case w != nil:
		if _, _, err = c.rebuild(seq, w, chainWith(chain, h)); err == nil {
			err = c.eng.Truncate(seq, h.base)
		}
	default:
		return 0, nil, errNoBase
	}
	n := 0
	if err == nil {
		n, err = ts.ImportTail(seq, h.blob)
	}
	if err != nil {
		c.eng.Free(seq)
		return 0, nil, fmt.Errorf("kv: seeding a tail from its prefix: %w", err)
	}
	return n, res, nil
}

// wholeBlob is tail h's stream as one exported state, for parking, put
// together in a free sequence. The error is errNoBase when the tail can
// never be whole again.
func (c *Cache) wholeBlob(h *hostEntry) ([]byte, error) {
	if len(c.free) == 0 {
		return nil, errors.New("kv: no free sequence to put a tail together in")
	}
	seq := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	defer c.freeSeq(seq)
	if _, _, err := c.importHost(seq, h); err != nil {
		return nil, err
	}
	return c.eng.Export(seq, nil)
}

// tailLost reports whether h is a tail whose prefix no entry holds any
// more: it can never seed a prompt nor be parked.
func (c *Cache) tailLost(h *hostEntry) bool {
	if h.base == 0 {
		return false
	}
	res, w := c.baseOf(h, nil)
	return res == nil && w == nil
}
