package kv

import (
	"slices"
	"testing"
	"time"

	"superfluid/engine"
)

// serveOn is serve for the tail-capable fake.
func serveOn(t *testing.T, c *Cache, f *tailEngine, prompt, reply []engine.Token) int {
	t.Helper()
	return serve(t, c, f.fakeEngine, prompt, reply)
}

// handOver serves a 110-token conversation, then an edit keeping its first
// 85 tokens, published with a 5-token reply; it returns the original
// conversation and the edit's stream.
func handOver(t *testing.T, c *Cache, f *tailEngine) (original, edited []engine.Token) {
	t.Helper()
	original = cat(seqOf(1, 100), seqOf(500, 10))
	serveOn(t, c, f, original[:100], original[100:])
	edited = cat(seqOf(1, 85), seqOf(3000, 20), seqOf(4000, 5))
	if cached := serveOn(t, c, f, edited[:105], edited[105:]); cached != 85 {
		t.Fatalf("the edit found %d tokens cached, want 85", cached)
	}
	return original, edited
}

// An edit's hand-over copies out only the part of the original it cuts;
// the original's next turn puts it back onto the prefix the edit kept.
func TestEditHandsOverOnlyTheTailItCuts(t *testing.T) {
	f := newTailEngine(4)
	c, _ := New(f, Config{Seqs: 4, HostBytes: 1 << 20, MinHostTokens: 16, MaxResidentTokens: 32})
	original, edited := handOver(t, c, f)
	if f.exports != 0 || f.tailExports != 1 || c.Stats().HostTails.Load() != 1 {
		t.Fatalf("%d whole exports and %d tail exports, want 0 and 1", f.exports, f.tailExports)
	}
	var host []Entry
	for _, e := range c.Entries() {
		if e.Tier == "host" {
			host = append(host, e)
		}
	}
	if len(host) != 1 || host[0].Tokens != 110 || host[0].Bytes != 6+4*25 {
		t.Fatalf("host memory holds %+v; want the original's 110 tokens in the bytes of its last 25", host)
	}
	// serve checks that the sequence holds the prompt's cached prefix.
	if got := serveOn(t, c, f, append(slices.Clone(original), 800, 801), nil); got != 110 || c.LastAcquireTier() != "host" {
		t.Fatalf("the original's next turn found %d tokens in %q, want 110 from host memory", got, c.LastAcquireTier())
	}
	if f.imports != 0 || f.tailImports != 1 {
		t.Fatalf("%d whole imports and %d tail imports, want 0 and 1", f.imports, f.tailImports)
	}
	// The edit's entry was handed over the other way before the tail came
	// back (its cells past the shared prefix moved out, so the original's
	// did not land above them): its own next turn is a tail import too.
	if f.exports != 0 || f.tailExports != 2 {
		t.Fatalf("%d whole exports and %d tail exports, want 0 and the edit's tail besides the original's", f.exports, f.tailExports)
	}
	if got := serveOn(t, c, f, append(slices.Clone(edited), 801), nil); got != len(edited) || c.LastAcquireTier() != "host" {
		t.Fatalf("the edit's next turn found %d tokens in %q, want %d from host memory", got, c.LastAcquireTier(), len(edited))
	}
	if f.imports != 0 || f.tailImports != 2 {
		t.Fatalf("%d whole imports and %d tail imports, want 0 and 2", f.imports, f.tailImports)
	}
}

// Once the edit's entry has left the pool whole for host memory, the tail
// is put back onto its import.
func TestTailContinuesAWholeStreamInHostMemory(t *testing.T) {
	f := newTailEngine(4)
	c, _ := New(f, Config{Seqs: 4, HostBytes: 1 << 20, MinHostTokens: 16, MaxResidentTokens: 32})
	original, _ := handOver(t, c, f)
	serveOn(t, c, f, seqOf(9000, 40), nil) // another conversation moves the edit out
	for _, e := range c.Entries() {
		if e.Tier == "resident" && e.Tokens >= 85 {
			t.Fatalf("the edit stayed in the pool: %+v", c.Entries())
		}
	}
	if got := serveOn(t, c, f, append(slices.Clone(original), 800), nil); got != 110 || c.LastAcquireTier() != "host" {
		t.Fatalf("the original's next turn found %d tokens in %q, want 110 from host memory", got, c.LastAcquireTier())
	}
	if f.imports != 1 || f.tailImports != 1 {
		t.Fatalf("%d whole imports and %d tail imports, want the edit's and the tail", f.imports, f.tailImports)
	}
}

// A tail whose prefix no entry holds any more seeds nothing: it is dropped
// and counted, and the prompt is served from what is left.
func TestTailWithoutItsPrefixIsDropped(t *testing.T) {
	f := newTailEngine(4)
	// Host memory holds a tail, not a whole stream: the edit, moved out
	// of the pool, is dropped.
	c, _ := New(f, Config{Seqs: 4, HostBytes: 200, MinHostTokens: 16, MaxResidentTokens: 32})
	original, _ := handOver(t, c, f)
	serveOn(t, c, f, seqOf(9000, 40), nil)
	if got := serveOn(t, c, f, append(slices.Clone(original), 800), nil); got != 0 {
		t.Fatalf("the original's next turn found %d tokens cached with its prefix gone, want 0", got)
	}
	if c.Stats().HostTailsLost.Load() != 1 || f.tailImports != 0 {
		t.Fatalf("%d tails lost, %d imported; want 1 and 0", c.Stats().HostTailsLost.Load(), f.tailImports)
	}
	for _, e := range c.Entries() {
		if e.Tier == "host" && e.Tokens == 110 {
			t.Fatalf("the lost tail stayed in host memory: %+v", c.Entries())
		}
	}
}

// A tail goes to disk whole, as the server stops: after a restart the
// original conversation resumes from its park file.
func TestTailIsParkedWholeAndResumesAfterARestart(t *testing.T) {
	dir := t.TempDir()
	f := newTailEngine(4)
	c, err := New(f, Config{Seqs: 4, HostBytes: 1 << 20, MinHostTokens: 16, MaxResidentTokens: 32, Park: openPark(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	original, edited := handOver(t, c, f)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	f2 := newTailEngine(4)
	c2, err := New(f2, Config{Seqs: 4, HostBytes: 1 << 20, MinHostTokens: 16, Park: openPark(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for _, conv := range [][]engine.Token{original, edited} {
		if got := serveOn(t, c2, f2, append(slices.Clone(conv), 800), nil); got != len(conv) || c2.LastAcquireTier() != "parked" {
			t.Fatalf("after a restart a %d-token conversation found %d tokens in %q, want all from disk", len(conv), got, c2.LastAcquireTier())
		}
	}
}

// Entries idle past ParkIdle: the tail is parked whole before the prefix
// it continues leaves the pool.
func TestIdleTailIsParkedBeforeItsPrefixLeaves(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1e9, 0)
	f := newTailEngine(4)
	c, err := New(f, Config{Seqs: 4, HostBytes: 1 << 20, MinHostTokens: 16, MaxResidentTokens: 32, Park: openPark(t, dir), ParkIdle: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	original, _ := handOver(t, c, f)
	now = now.Add(2 * time.Minute)
	// A write the park queue has no room for yet is tried again on a
	// later call, as the writer drains it.
	deadline := time.Now().Add(10 * time.Second)
	for c.Tidy(); tiers(c)["resident"]+tiers(c)["host"] > 0; c.Tidy() {
		if time.Now().After(deadline) {
			t.Fatalf("idle entries stayed in memory: %+v", c.Entries())
		}
		time.Sleep(time.Millisecond)
	}
	if lost := c.Stats().HostTailsLost.Load(); lost != 0 {
		t.Fatalf("%d tails lost", lost)
	}
	waitWritten(t, c, 2)
	if got := serveOn(t, c, f, append(slices.Clone(original), 800), nil); got != 110 || c.LastAcquireTier() != "parked" {
		t.Fatalf("the original found %d tokens in %q, want 110 from disk", got, c.LastAcquireTier())
	}
}

// A conversation that shares only a system prompt with a cached one
// moves that one's part past the prompt out, not the prompt with it; its
// next turn puts it back onto the prompt, which the other still holds.
func TestAnotherConversationMovesOnlyThePartPastTheSharedPrompt(t *testing.T) {
	f := newTailEngine(4)
	c, _ := New(f, Config{Seqs: 4, HostBytes: 1 << 20, MinHostTokens: 16, MaxResidentTokens: 32})
	system := seqOf(1, 40)
	a := cat(system, seqOf(100, 30))
	serveOn(t, c, f, a, nil)
	if got := serveOn(t, c, f, cat(system, seqOf(200, 30)), nil); got != 40 {
		t.Fatalf("the second conversation found %d tokens cached, want the 40-token prompt", got)
	}
	if f.exports != 0 || f.tailExports != 1 {
		t.Fatalf("%d whole and %d tail exports, want the first conversation's 30 tokens past the prompt alone", f.exports, f.tailExports)
	}
	if got := serveOn(t, c, f, cat(a, seqOf(400, 2)), nil); got != len(a) || c.LastAcquireTier() != "host" {
		t.Fatalf("the first conversation's next turn found %d tokens in %q, want %d from host memory", got, c.LastAcquireTier(), len(a))
	}
	if f.exports != 0 || f.imports != 0 || f.tailImports != 1 {
		t.Fatalf("%d whole exports, %d whole imports and %d tail imports, want the tail alone", f.exports, f.imports, f.tailImports)
	}
}

// An edit of the edited conversation further back cuts below the prefix
// the original's tail continues: the original is then put back onto the
// edited conversation, itself put back onto the prefix the second edit
// kept.
func TestTailContinuesATailOfAnEditFurtherBack(t *testing.T) {
	f := newTailEngine(6)
	c, _ := New(f, Config{Seqs: 6, HostBytes: 1 << 20, MinHostTokens: 16, MaxResidentTokens: 32})
	original, edited := handOver(t, c, f)
	again := cat(edited[:50], seqOf(6000, 20))
	if got := serveOn(t, c, f, again, seqOf(6100, 5)); got != 50 {
		t.Fatalf("the second edit found %d tokens cached, want 50", got)
	}
	if f.exports != 0 {
		t.Fatalf("%d whole exports, want tails alone", f.exports)
	}
	for _, conv := range [][]engine.Token{original, edited} {
		if got := serveOn(t, c, f, append(slices.Clone(conv), 800), nil); got != len(conv) || c.LastAcquireTier() != "host" {
			t.Fatalf("a %d-token conversation found %d tokens in %q, want all from host memory", len(conv), got, c.LastAcquireTier())
		}
	}
	if lost := c.Stats().HostTailsLost.Load(); lost != 0 {
		t.Fatalf("%d tails lost", lost)
	}
}

// As the cache closes with every sequence holding an entry, a tail is put
// together in the sequence of an entry already parked that no tail needs.
func TestTailIsParkedWholeWhenEverySequenceHoldsAnEntry(t *testing.T) {
	dir := t.TempDir()
	f := newTailEngine(2)
	c, err := New(f, Config{Seqs: 2, HostBytes: 1 << 20, MinHostTokens: 16, Park: openPark(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	original, _ := handOver(t, c, f)
	serveOn(t, c, f, seqOf(9000, 40), nil)
	if len(c.free) != 0 {
		t.Fatalf("%d sequences free, want none", len(c.free))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if lost := c.Stats().HostTailsLost.Load(); lost != 0 {
		t.Fatalf("%d tails lost as the cache closed", lost)
	}
	f2 := newTailEngine(2)
	c2, err := New(f2, Config{Seqs: 2, HostBytes: 1 << 20, MinHostTokens: 16, Park: openPark(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := serveOn(t, c2, f2, append(slices.Clone(original), 800), nil); got != len(original) || c2.LastAcquireTier() != "parked" {
		t.Fatalf("after a restart the original found %d tokens in %q, want %d from disk", got, c2.LastAcquireTier(), len(original))
	}
}
