package kv

import (
	"slices"
	"sync"
	"time"

	"superfluid/engine"
)

// Pins keep prompt prefixes resident for a while: Anthropic's
// cache_control breakpoints, which ask that a marked prefix (a long system
// prompt, a tool catalogue) survive the idle minutes between an agent's
// turns. An entry whose stream begins with a live pin is evicted after
// every unpinned one, is cut back to the pin rather than dropped when it
// is longer, and is not parked for idleness. A pin is a preference, not a
// reservation: when only pinned entries are left and room is needed (a
// sequence for a lane, the resident budget, a full KV pool), the least
// recently used of them goes as if unpinned, since refusing the room would
// fail live requests for the sake of a hint.

// maxPins bounds the pins held; a pin beyond it replaces the one that ends
// soonest.
const maxPins = 64

type pin struct {
	tokens []engine.Token
	until  time.Time
}

// pinTable is the live pins. Pin is called from request goroutines and
// read on the owner's, hence the lock; nothing else in the cache needs one.
type pinTable struct {
	mu   sync.Mutex
	list []pin
}

// Pin keeps tokens, a prefix of prompts to come, resident until ttl has
// passed on the cache's clock; pinning it again extends it. Any goroutine.
func (c *Cache) Pin(tokens []engine.Token, ttl time.Duration) {
	if len(tokens) == 0 || ttl <= 0 {
		return
	}
	until := c.cfg.Now().Add(ttl)
	t := &c.pins
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.list {
		if slices.Equal(t.list[i].tokens, tokens) {
			t.list[i].until = later(t.list[i].until, until)
			return
		}
	}
	p := pin{tokens: slices.Clone(tokens), until: until}
	if len(t.list) < maxPins {
		t.list = append(t.list, p)
		return
	}
	soonest := 0
	for i := range t.list {
		if t.list[i].until.Before(t.list[soonest].until) {
			soonest = i
		}
	}
	t.list[soonest] = p
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// live drops the pins that have ended and returns the rest.
func (t *pinTable) live(now time.Time) []pin {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.list = slices.DeleteFunc(t.list, func(p pin) bool { return !now.Before(p.until) })
	return slices.Clone(t.list)
}

// Pins reports how many pins are live. Any goroutine.
func (c *Cache) Pins() int { return len(c.pins.live(c.cfg.Now())) }

// pinned maps each node at which a resident or host entry ends to the
// longest live pin its stream begins with; nil when there are no pins.
func (c *Cache) pinned() map[*node]int {
	ps := c.pins.live(c.cfg.Now())
	if len(ps) == 0 {
		return nil
	}
	out := map[*node]int{}
	var walk func(n *node, depth int)
	walk = func(n *node, depth int) {
		if (n.resident != nil || n.host != nil) && out[n] < depth {
			out[n] = depth
		}
		for _, ch := range n.children {
			walk(ch, depth)
		}
	}
	for _, p := range ps {
		if n, matched := c.tree.match(p.tokens); matched == len(p.tokens) && n != &c.tree.root {
			walk(n, len(p.tokens))
		}
	}
	return out
}

// nodeAt returns the node at depth on n's path, splitting an edge to make
// one; depth must be in (0, n.depth].
func (c *Cache) nodeAt(n *node, depth int) *node {
	for n.parent != &c.tree.root && n.parent.depth >= depth {
		n = n.parent
	}
	if n.depth > depth {
		n = c.tree.split(n, len(n.edge)-(n.depth-depth))
	}
	return n
}
