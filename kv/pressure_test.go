package kv

import (
	"testing"
)

// Shedding (a memory warning) evicts host memory down to its low mark —
// the oldest first, to disk — and stops exports while it lasts: an entry
// leaving the pool goes to disk instead. Off again, exports resume.
func TestShedMemoryEmptiesHostMemoryToItsLowMarkAndStopsExports(t *testing.T) {
	// Each 100-token stream exports to 402 bytes: 2000 bytes hold four.
	c, f := newParked(t, t.TempDir(), 1, Config{HostBytes: 2000})
	for i := range 5 {
		serve(t, c, f, seqOf(1000*(i+1), 100), nil)
	}
	if got := tiers(c); got["host"] != 4 || got["resident"] != 1 {
		t.Fatalf("before: tiers %v", got)
	}
	exports := c.Stats().HostExports.Load()
	freed := c.ShedMemory(true)
	low := int64(2000 * DefaultLowWatermark / 100)
	if c.host.bytes > low || freed != 1608-c.host.bytes || len(c.host.entries) != 3 {
		t.Fatalf("shed: host holds %d bytes in %d entries (low mark %d), %d freed", c.host.bytes, len(c.host.entries), low, freed)
	}
	if n, _ := c.tree.match(seqOf(1000, 100)); n.host != nil {
		t.Fatal("the oldest host entry is still in host memory")
	}
	waitWritten(t, c, 1)
	if got := tiers(c); got["parked"] != 1 || got["host"] != 3 {
		t.Fatalf("shed: tiers %v, want the oldest parked", got)
	}
	// While shedding, the resident entry leaving the pool goes to disk.
	serve(t, c, f, seqOf(9000, 100), nil)
	waitWritten(t, c, 2)
	if got := tiers(c); got["host"] != 3 || got["parked"] != 2 || c.Stats().HostExports.Load() != exports {
		t.Fatalf("while shedding: tiers %v, %d exports (was %d); want no export", got, c.Stats().HostExports.Load(), exports)
	}
	if c.ShedMemory(false) != 0 {
		t.Fatal("turning shedding off evicted something")
	}
	serve(t, c, f, seqOf(11000, 100), nil)
	if c.Stats().HostExports.Load() != exports+1 {
		t.Fatal("exports did not resume after the pressure cleared")
	}
}

// The pool above its high mark is evicted down to its low mark; below
// the high mark it is left alone.
func TestShedMemoryEvictsThePoolAboveItsHighMarkToItsLowMark(t *testing.T) {
	c, f := newParked(t, t.TempDir(), 8, Config{MaxResidentTokens: 1000})
	f.desc.KVBytesPerToken = 10
	for i := range 8 {
		serve(t, c, f, seqOf(1000*(i+1), 100), nil)
	}
	if r := c.residentTokens(); r != 800 {
		t.Fatalf("%d resident tokens before, want 800", r)
	}
	if freed := c.ShedMemory(true); freed != 0 || c.residentTokens() != 800 {
		t.Fatalf("below the high mark (850): %d freed, %d resident", freed, c.residentTokens())
	}
	c.ShedMemory(false)
	c2, f2 := newParked(t, t.TempDir(), 8, Config{MaxResidentTokens: 900})
	f2.desc.KVBytesPerToken = 10
	for i := range 8 {
		serve(t, c2, f2, seqOf(1000*(i+1), 100), nil)
	}
	freed := c2.ShedMemory(true) // 800 > 85% of 900: down to 70%, 630
	if r := c2.residentTokens(); r > 630 || freed != int64(800-r)*10 {
		t.Fatalf("above the high mark: %d resident (low mark 630), %d bytes freed", r, freed)
	}
	waitWritten(t, c2, 2)
	if got := tiers(c2); got["parked"] != 2 || got["resident"] != 6 {
		t.Fatalf("tiers %v, want the two oldest parked", got)
	}
}

// A stream a lane parked for pressure released leaves the pool for disk,
// and the lane's next admission restores it whole.
func TestParkStreamMovesTheReleasedStreamToDisk(t *testing.T) {
	c, f := newParked(t, t.TempDir(), 2, Config{})
	f.desc.KVBytesPerToken = 10
	stream := cat(seqOf(1, 150), seqOf(500, 30))
	serve(t, c, f, seqOf(1, 150), seqOf(500, 30))
	if freed := c.ParkStream(stream[:100]); freed != 0 {
		t.Fatalf("a prefix inside the entry parked %d bytes; only the stream itself moves", freed)
	}
	if freed := c.ParkStream(stream); freed != 1800 {
		t.Fatalf("parked %d bytes, want 180 tokens × 10", freed)
	}
	waitWritten(t, c, 1)
	if got := tiers(c); got["parked"] != 1 || got["resident"] != 0 {
		t.Fatalf("tiers %v, want the stream on disk only", got)
	}
	if cached := serve(t, c, f, cat(stream, seqOf(900, 1)), nil); cached != len(stream) {
		t.Fatalf("resumed with %d tokens cached, want the parked %d", cached, len(stream))
	}
	// Without a disk tier the stream stays where it is.
	f2 := newFakeEngine(2)
	c2, err := New(f2, Config{Seqs: 2})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, c2, f2, seqOf(1, 150), seqOf(500, 30))
	if freed := c2.ParkStream(stream); freed != 0 || len(c2.Entries()) != 1 {
		t.Fatalf("without a disk tier: %d freed, %d entries; want it kept", freed, len(c2.Entries()))
	}
}

func TestWatermarksValidate(t *testing.T) {
	for _, w := range []Watermarks{{High: 70, Low: 70}, {High: 101, Low: 50}, {High: 50, Low: -1}, {Low: 90}} {
		if _, err := New(newFakeEngine(1), Config{Seqs: 1, Watermarks: w}); err == nil {
			t.Errorf("watermarks %+v accepted", w)
		}
	}
}
