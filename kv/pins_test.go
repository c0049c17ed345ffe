package kv

import (
	"testing"
	"time"

	"superfluid/engine"
)

// A pinned prefix outlives LRU order: with every sequence taken, the
// unpinned entry goes even though it was used last; once the pin has
// ended, LRU decides again.
func TestPinnedEntryEvictedLast(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newFakeEngine(2)
	c, err := New(f, Config{Seqs: 2, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	system := seqOf(1000, 50)
	a := cat(system, seqOf(2000, 10))
	c.Pin(system, 5*time.Minute)
	serve(t, c, f, a, seqOf(3000, 5))
	serve(t, c, f, seqOf(4000, 40), seqOf(5000, 5)) // newer, unpinned
	// A third, unrelated prompt needs a sequence: both are entries.
	serve(t, c, f, seqOf(6000, 30), nil)
	if got := serve(t, c, f, cat(a, seqOf(3000, 5), seqOf(7000, 3)), nil); got != 65 {
		t.Fatalf("the pinned conversation was evicted: %d tokens cached, want 65", got)
	}
	if c.Pins() != 1 {
		t.Fatalf("%d pins, want 1", c.Pins())
	}
	now = now.Add(6 * time.Minute)
	if c.Pins() != 0 {
		t.Fatalf("%d pins after the TTL, want 0", c.Pins())
	}
}

// Evicting a pinned entry longer than its pin cuts it back to the pin,
// so the marked prefix stays resident.
func TestEvictionCutsBackToPin(t *testing.T) {
	f := newFakeEngine(4)
	c, err := New(f, Config{Seqs: 4, MaxResidentTokens: 80})
	if err != nil {
		t.Fatal(err)
	}
	system := seqOf(1000, 50)
	c.Pin(system, time.Hour)
	serve(t, c, f, cat(system, seqOf(2000, 40)), seqOf(3000, 10))
	// The conversation being served stays whole until another prompt
	// is admitted.
	if es := c.Entries(); len(es) != 1 || es[0].Tokens != 100 {
		t.Fatalf("entries %+v, want the conversation's 100 tokens", es)
	}
	serve(t, c, f, seqOf(9000, 10), nil)
	var pinned []Entry
	for _, e := range c.Entries() {
		if e.Tier == "resident" && e.Tokens == 50 && f.SeqLen(e.Seq) == 50 {
			pinned = append(pinned, e)
		}
	}
	if len(pinned) != 1 {
		t.Fatalf("entries %+v, want the 50-token pinned prefix resident", c.Entries())
	}
	other := cat(system, seqOf(8000, 20))
	if got := serve(t, c, f, other, nil); got != 50 {
		t.Fatalf("a prompt sharing the pinned prefix found %d tokens, want 50", got)
	}
}

// Pins are a preference: when only pinned entries hold the sequences, a
// lane still gets one.
func TestPinsYieldToLanes(t *testing.T) {
	f := newFakeEngine(1)
	c, err := New(f, Config{Seqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := seqOf(1000, 40)
	c.Pin(p, time.Hour)
	serve(t, c, f, cat(p, seqOf(2000, 5)), nil)
	if _, _, err := c.Acquire(seqOf(5000, 10)); err != nil {
		t.Fatalf("a lane was refused a sequence for a pin: %v", err)
	}
}

// Pinning the same prefix again extends it; the table is bounded.
func TestPinTable(t *testing.T) {
	now := time.Unix(0, 0)
	f := newFakeEngine(1)
	c, err := New(f, Config{Seqs: 1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	c.Pin(seqOf(1, 5), time.Minute)
	now = now.Add(50 * time.Second)
	c.Pin(seqOf(1, 5), time.Minute)
	now = now.Add(50 * time.Second)
	if c.Pins() != 1 {
		t.Fatalf("%d pins, want the renewed one", c.Pins())
	}
	for i := range maxPins + 10 {
		c.Pin([]engine.Token{engine.Token(100 + i)}, time.Duration(i+1)*time.Minute)
	}
	if c.Pins() != maxPins {
		t.Fatalf("%d pins, want at most %d", c.Pins(), maxPins)
	}
	c.Pin(nil, time.Hour) // nothing to pin
}
