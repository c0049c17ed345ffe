package kv

import (
	"fmt"

	"superfluid/engine"
)

// Memory pressure (sched.PressureCache): when the machine runs short of
// memory the scheduler turns shedding on. While it is on, nothing more is
// exported to host memory (an evicted entry goes to disk, or is dropped),
// host memory is evicted down to its low watermark, and the pool's idle
// entries down to theirs: the Low share of each budget, parked on the way
// out when there is a disk tier. The pool's mark is checked against High
// first, as the seeds do: a pool below it is left alone.

// Watermarks are the marks shedding works to, in percent of a budget
// (host memory's HostBytes, the pool's resident budget).
type Watermarks struct {
	// High is the share of the pool's budget above which shedding evicts
	// resident entries (default 85).
	High int
	// Low is what shedding evicts host memory and the pool down to
	// (default 70).
	Low int
}

// The seeds' marks.
const (
	DefaultHighWatermark = 85
	DefaultLowWatermark  = 70
)

func (w *Watermarks) validate() error {
	if w.High == 0 {
		w.High = DefaultHighWatermark
	}
	if w.Low == 0 {
		w.Low = DefaultLowWatermark
	}
	if w.High < 1 || w.High > 100 || w.Low < 1 || w.Low >= w.High {
		return fmt.Errorf("kv: watermarks high %d%%, low %d%%: need 0 < low < high <= 100", w.High, w.Low)
	}
	return nil
}

// ShedMemory turns shedding on or off, and when on, evicts host memory
// and the pool down to their low watermarks now. It returns the bytes
// evicted: host memory's blobs, and the pool's tokens at the model's
// bytes per token.
func (c *Cache) ShedMemory(on bool) int64 {
	c.shedding = on
	if !on {
		return 0
	}
	c.tidy()
	freed := c.shedHost() + c.shedResident()
	c.publishGauges()
	return freed
}

// shedHost evicts host memory's least recently used entries (to disk when
// there is a disk tier) until it holds no more than its low mark.
func (c *Cache) shedHost() int64 {
	low := c.host.budget * int64(c.cfg.Watermarks.Low) / 100
	var freed int64
	for c.host.bytes > low && len(c.host.entries) > 0 {
		h := c.host.oldest()
		if c.host.leaving != nil {
			c.host.leaving(h)
		}
		freed += h.size()
		c.host.remove(&c.tree, h)
	}
	return freed
}

// shedResident evicts the pool's idle entries down to the low mark of its
// resident budget when they hold more than the high mark.
func (c *Cache) shedResident() int64 {
	budget := c.residentBudget()
	if budget <= 0 {
		budget = c.eng.Descriptor().Ctx // bounded by the pool alone
	}
	if budget <= 0 {
		return 0
	}
	before := c.residentTokens()
	if before*100 <= budget*c.cfg.Watermarks.High {
		return 0
	}
	low := budget * c.cfg.Watermarks.Low / 100
	for c.residentTokens() > low {
		v := c.victim(nil)
		if v == nil {
			break
		}
		c.evict(v, c.cutBackTo(v))
	}
	return int64(before-c.residentTokens()) * c.eng.Descriptor().KVBytesPerToken
}

// shedBudget is the resident budget enforceBudget holds the pool to: the
// low mark while shedding.
func (c *Cache) shedBudget(budget int) int {
	if c.shedding && budget > 0 {
		return budget * c.cfg.Watermarks.Low / 100
	}
	return budget
}

// ParkStream moves the entry holding exactly tokens (a lane parked for
// pressure just released it) out of the pool to the disk tier, and
// returns the pool bytes freed (those of a stream the shedding budget
// already sent to disk as it was released included). Without a disk tier, or when the writer
// cannot take it now (the scheduler's goroutine does not wait on disk),
// the entry stays where it is and 0 is returned: the lane still resumes
// warm.
func (c *Cache) ParkStream(tokens []engine.Token) int64 {
	n, matched := c.tree.match(tokens)
	if matched != len(tokens) || n.depth != len(tokens) {
		return 0 // cached inside a longer entry, or not at all
	}
	bytes := int64(len(tokens)) * c.eng.Descriptor().KVBytesPerToken
	if n.resident == nil {
		if n.park != nil && n.host == nil {
			return bytes // the pool's low mark sent it to disk as it was released
		}
		return 0
	}
	e := n.resident
	if c.pinned()[e.node] > 0 || !c.parkSeq(n, e.seq, false) {
		return 0
	}
	n.resident = nil
	delete(c.entries, e.seq)
	c.freeSeq(e.seq)
	c.tree.prune(n)
	c.publishGauges()
	return bytes
}
