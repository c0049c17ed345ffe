package kv

import "testing"

// What a trace says of an admission and a publish: the tier the prefix
// came from (none, resident, host memory, disk) and whether the published
// stream went to disk.
func TestLastAcquireTierAndReleaseParked(t *testing.T) {
	// Resident, then host memory: the host tier test's shape.
	f := newFakeEngine(2)
	c, _ := New(f, Config{Seqs: 2, HostBytes: 1 << 20, MinHostTokens: 16})
	long := seqOf(1, 100)
	serve(t, c, f, long, seqOf(500, 10))
	if c.LastAcquireTier() != "" || c.LastReleaseParked() {
		t.Fatalf("cold start: tier %q, parked %v", c.LastAcquireTier(), c.LastReleaseParked())
	}
	serve(t, c, f, cat(long, seqOf(500, 10), seqOf(600, 3)), nil)
	if c.LastAcquireTier() != "resident" {
		t.Fatalf("a resident prefix's tier %q", c.LastAcquireTier())
	}
	s1, _, _ := c.Acquire(seqOf(2000, 5))
	s2, _, _ := c.Acquire(seqOf(3000, 5))
	if c.LastAcquireTier() != "" {
		t.Fatalf("a cold acquire after a warm one: tier %q", c.LastAcquireTier())
	}
	c.Release(s1, nil)
	c.Release(s2, nil)
	serve(t, c, f, cat(long, seqOf(500, 10), seqOf(600, 3), seqOf(700, 2)), nil)
	if c.LastAcquireTier() != "host" {
		t.Fatalf("a host-memory prefix's tier %q (entries %+v)", c.LastAcquireTier(), c.Entries())
	}

	// Disk: parked as published (eager), then read back by a restore.
	pc, pf := newParked(t, t.TempDir(), 1, Config{ParkEager: true})
	conv := seqOf(1, 100)
	serve(t, pc, pf, conv, seqOf(500, 20))
	if !pc.LastReleaseParked() {
		t.Fatal("an eager park's release not reported parked")
	}
	waitWritten(t, pc, 1)
	serve(t, pc, pf, seqOf(3000, 40), nil) // evicts the conversation
	seq, _, restoring, err := pc.AcquireRestoring(cat(conv, seqOf(500, 20), seqOf(800, 7)), nil)
	if err != nil || !restoring || pc.LastAcquireTier() != "parked" {
		t.Fatalf("restoring %v tier %q: %v", restoring, pc.LastAcquireTier(), err)
	}
	pc.Release(seq, nil)
	if pc.LastReleaseParked() {
		t.Fatal("an empty release reported parked")
	}
}
