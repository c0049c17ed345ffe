package kv

import (
	"time"

	"superfluid/engine"
)

// hostEntry is an evicted stream's exported state kept in host memory.
type hostEntry struct {
	node *node
	blob []byte
	// base is 0 for a whole stream; for a tail (tail.go), the tokens
	// before the blob's, which another entry must hold to seed from it.
	base    int
	ckpts   []engine.Checkpoint // the stream's checkpoints (partial.go)
	used    uint64
	touched time.Time // wall clock of the last use, for idle parking
}

// hostTier keeps exported entries within a byte budget, least recently used
// out first.
type hostTier struct {
	budget  int64
	bytes   int64
	entries []*hostEntry
	// leaving, when set, is told of each entry the budget pushes out,
	// before it goes (the disk tier takes it).
	leaving func(*hostEntry)
	// held are not pushed out: the entry a lane is about to be seeded
	// from, and those a tail among them is put back onto, while the pool
	// makes room for it (Cache.roomToLoad).
	held map[*hostEntry]bool
}

func (t *hostTier) fits(n int) bool { return int64(n) <= t.budget }

// add keeps h, at its node in place of any entry there, when it fits.
func (t *hostTier) add(tree *radix, h *hostEntry) {
	if !t.fits(int(h.size())) {
		return
	}
	n := h.node
	if n.host != nil {
		t.remove(tree, n.host)
	}
	n.host = h
	t.entries = append(t.entries, h)
	t.bytes += h.size()
	for t.bytes > t.budget {
		oldest := t.oldest()
		if oldest == nil {
			return // only held entries are left; they go once loaded
		}
		if t.leaving != nil {
			t.leaving(oldest)
		}
		t.remove(tree, oldest)
	}
}

// oldest is the least recently used entry but the held ones; nil when
// there is none.
func (t *hostTier) oldest() *hostEntry {
	var oldest *hostEntry
	for _, e := range t.entries {
		if !t.held[e] && (oldest == nil || e.used < oldest.used) {
			oldest = e
		}
	}
	return oldest
}

func (t *hostTier) remove(tree *radix, h *hostEntry) {
	for i, e := range t.entries {
		if e == h {
			t.entries = append(t.entries[:i], t.entries[i+1:]...)
			break
		}
	}
	t.bytes -= h.size()
	if h.node.host == h {
		h.node.host = nil
		tree.prune(h.node)
	}
}

// size is what h holds in host memory: its state and its checkpoints.
func (h *hostEntry) size() int64 { return int64(len(h.blob)) + checkpointBytes(h.ckpts) }
