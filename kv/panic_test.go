package kv

import (
	"testing"

	"superfluid/panics"
)

// A panic on a restore's reader goroutine fails that restore alone, as a
// read error does: the lane's sequence comes back empty (it prefills
// cold), the file leaves the index, the panic is counted under "restore",
// and the cache goes on serving. Close waits for the reader (no leak).
func TestRestoreReaderPanicFailsOnlyThatRestore(t *testing.T) {
	c, f := newParked(t, t.TempDir(), 1, Config{})
	conv := seqOf(1, 100)
	serve(t, c, f, conv, seqOf(500, 20))
	serve(t, c, f, seqOf(3000, 40), nil) // evicts the conversation to disk
	waitWritten(t, c, 1)
	c.cfg.BeforeRestoreRead = func(int) { panic("fault reading this file") }
	before := panics.Count(panics.Restore)

	turn2 := cat(conv, seqOf(500, 20), seqOf(800, 7))
	ready := make(chan struct{})
	seq, cached, restoring, err := c.AcquireRestoring(turn2, func() { close(ready) })
	if err != nil || !restoring || cached != 0 {
		t.Fatalf("acquire: cached %d, restoring %v, %v", cached, restoring, err)
	}
	<-ready
	if got := c.FinishRestore(seq); got != 0 {
		t.Fatalf("a restore whose read panicked holds %d tokens", got)
	}
	if got := f.seqs[seq]; len(got) != 0 {
		t.Fatalf("the sequence holds %d tokens, want none", len(got))
	}
	if got := panics.Count(panics.Restore) - before; got != 1 {
		t.Errorf("%d panics counted, want 1", got)
	}
	if c.Stats().ParkFailures.Load() != 1 {
		t.Errorf("park failures %d, want 1", c.Stats().ParkFailures.Load())
	}
	f.fill(seq, turn2)
	c.Release(seq, turn2)
	c.cfg.BeforeRestoreRead = nil
	if cached := serve(t, c, f, cat(turn2, seqOf(900, 5)), nil); cached != len(turn2) {
		t.Errorf("the next turn found %d tokens cached, want %d", cached, len(turn2))
	}
}
