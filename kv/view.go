package kv

import (
	"slices"
	"sync/atomic"
	"time"
)

// Entry describes one cached stream, for status views (/api/ps, /props).
type Entry struct {
	Tier   string // "resident" (in the KV pool), "host" (host memory) or "parked" (on disk)
	Tokens int
	Seq    int32 // resident entries only
	Bytes  int64 // host and parked entries; 0 for a park write still queued
	// Lossy marks a parked entry demoted to 8 bits (--park-lossy): a
	// conversation resumed from it may continue differently.
	Lossy bool
	// LastUsed is when the entry was last matched or published (parked:
	// written or restored).
	LastUsed time.Time
}

// ParkInfo describes the disk tier's settings and size, for /props.
type ParkInfo struct {
	Enabled bool          `json:"enabled"`
	Dir     string        `json:"dir,omitempty"`
	Budget  int64         `json:"budget_bytes,omitempty"`
	Eager   bool          `json:"eager,omitempty"`
	Idle    time.Duration `json:"idle,omitempty"`
	// Lossy: parked state is demoted to 8 bits; outputs of conversations
	// restored from disk may differ from those of an uncached run.
	Lossy bool  `json:"lossy"`
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
}

// viewCache holds the last published list of resident and host entries,
// for readers on other goroutines.
type viewCache struct{ p atomic.Pointer[[]Entry] }

func (c *Cache) memoryEntries() []Entry {
	out := make([]Entry, 0, len(c.entries)+len(c.host.entries))
	for _, e := range c.entries {
		out = append(out, Entry{Tier: "resident", Tokens: e.node.depth, Seq: e.seq, LastUsed: e.touched})
	}
	for _, h := range c.host.entries {
		out = append(out, Entry{Tier: "host", Tokens: h.node.depth, Bytes: int64(len(h.blob)), LastUsed: h.touched})
	}
	return out
}

func (c *Cache) publishView() {
	v := c.memoryEntries()
	c.view.p.Store(&v)
}

// Entries lists what the cache holds in every tier, longest first,
// including park writes still queued. Owner goroutine only; View is the
// same for any goroutine.
func (c *Cache) Entries() []Entry {
	out := c.memoryEntries()
	if c.park != nil {
		onDisk := map[string]Entry{}
		for _, m := range c.park.List() {
			onDisk[m.Name] = parkedEntry(m.Tokens, m.Bytes, m.Lossy, m.ModTime)
		}
		for name, p := range c.parked {
			e, ok := onDisk[name]
			if !ok {
				e = Entry{Tier: "parked", Tokens: p.node.depth}
			}
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out
}

// View lists what the cache holds, longest first: resident and host
// entries as of the cache's last change, parked files as of now (queued
// writes not yet). Any goroutine.
func (c *Cache) View() []Entry {
	var out []Entry
	if p := c.view.p.Load(); p != nil {
		out = slices.Clone(*p)
	}
	if c.park != nil {
		for _, m := range c.park.List() {
			out = append(out, parkedEntry(m.Tokens, m.Bytes, m.Lossy, m.ModTime))
		}
	}
	sortEntries(out)
	return out
}

// TierTotal is what one tier holds: entries, their tokens and bytes.
type TierTotal struct {
	Entries int
	Tokens  int
	Bytes   int64
}

// Tiers sums entries (a View) by tier, for the status views.
func Tiers(entries []Entry) (resident, host, parked TierTotal) {
	for _, e := range entries {
		var t *TierTotal
		switch e.Tier {
		case "resident":
			t = &resident
		case "host":
			t = &host
		case "parked":
			t = &parked
		default:
			continue
		}
		t.Entries++
		t.Tokens += e.Tokens
		t.Bytes += e.Bytes
	}
	return resident, host, parked
}

func parkedEntry[T any](toks []T, bytes int64, lossy bool, mod time.Time) Entry {
	return Entry{Tier: "parked", Tokens: len(toks), Bytes: bytes, Lossy: lossy, LastUsed: mod}
}

func sortEntries(out []Entry) {
	slices.SortStableFunc(out, func(a, b Entry) int { return b.Tokens - a.Tokens })
}

// ParkInfo reports the disk tier's settings and size. Any goroutine.
func (c *Cache) ParkInfo() ParkInfo {
	if c.park == nil {
		return ParkInfo{}
	}
	st := c.park.Stats()
	return ParkInfo{
		Enabled: true, Dir: c.park.Dir(), Budget: c.park.Budget(), Eager: c.cfg.ParkEager, Idle: c.cfg.ParkIdle,
		Lossy: c.park.Lossy(), Files: st.Files.Load(), Bytes: st.Bytes.Load(),
	}
}
