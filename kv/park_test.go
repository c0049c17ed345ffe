package kv

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/park"
)

func openPark(t *testing.T, dir string) *park.Store {
	t.Helper()
	s, err := park.Open(park.Config{Dir: dir, Identity: "fake model", KVType: "f16", VLayout: park.VRows, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newParked makes a cache over a fresh fake engine with a park store on
// dir; the cache is closed at the end of the test.
func newParked(t *testing.T, dir string, seqs int, cfg Config) (*Cache, *fakeEngine) {
	t.Helper()
	f := newFakeEngine(seqs)
	cfg.Seqs = seqs
	cfg.Park = openPark(t, dir)
	if cfg.MinHostTokens == 0 {
		cfg.MinHostTokens = 16
	}
	c, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, f
}

// waitWritten waits for the park writer to have written n files.
func waitWritten(t *testing.T, c *Cache, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.ParkStats().Parks.Load()+c.ParkStats().WriteErrors.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d park writes done", c.ParkStats().Parks.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func tiers(c *Cache) map[string]int {
	out := map[string]int{}
	for _, e := range c.Entries() {
		out[e.Tier]++
	}
	return out
}

func TestEvictedEntryIsParkedAndRestored(t *testing.T) {
	c, f := newParked(t, t.TempDir(), 1, Config{})
	conv := seqOf(1, 100)
	serve(t, c, f, conv, seqOf(500, 20))
	// One sequence: the next lane evicts the conversation, to disk (no
	// host tier).
	serve(t, c, f, seqOf(3000, 40), nil)
	waitWritten(t, c, 1)
	if got := tiers(c); got["parked"] != 1 {
		t.Fatalf("tiers %v", got)
	}
	turn2 := cat(conv, seqOf(500, 20), seqOf(800, 7))
	if cached := serve(t, c, f, turn2, nil); cached != 120 {
		t.Fatalf("cached %d from disk, want 120", cached)
	}
	if c.Stats().ParkHits.Load() != 1 || f.imports != 1 || c.ParkStats().Loads.Load() != 1 {
		t.Fatalf("park hits %d imports %d loads %d", c.Stats().ParkHits.Load(), f.imports, c.ParkStats().Loads.Load())
	}
	if c.Stats().ParkRestoreNanos.Load() <= 0 {
		t.Fatal("restore time not counted")
	}
}

func TestHostOverflowGoesToDisk(t *testing.T) {
	// Each 100-token stream exports to 402 bytes: a 1000-byte host tier
	// holds two; the rest are parked as the host tier pushes them out.
	c, f := newParked(t, t.TempDir(), 1, Config{HostBytes: 1000})
	for i := range 5 {
		serve(t, c, f, seqOf(1000*(i+1), 100), nil)
	}
	waitWritten(t, c, 2)
	if got := tiers(c); got["host"] != 2 || got["parked"] != 2 || got["resident"] != 1 {
		t.Fatalf("tiers %v", got)
	}
	// An entry too big for host memory goes straight to disk.
	c2, f2 := newParked(t, t.TempDir(), 1, Config{HostBytes: 300})
	serve(t, c2, f2, seqOf(1, 100), nil)
	serve(t, c2, f2, seqOf(5000, 10), nil)
	waitWritten(t, c2, 1)
	if got := tiers(c2); got["parked"] != 1 || got["host"] != 0 {
		t.Fatalf("tiers %v", got)
	}
}

func TestRestartResumesFromDisk(t *testing.T) {
	dir := t.TempDir()
	c, f := newParked(t, dir, 4, Config{})
	conv := cat(seqOf(1, 100), seqOf(500, 30))
	serve(t, c, f, seqOf(1, 100), seqOf(500, 30))
	serve(t, c, f, seqOf(7000, 10), nil) // short: not worth a file
	if err := c.Close(); err != nil {    // the server stops: what is resident is parked
		t.Fatal(err)
	}
	if c.ParkStats().Parks.Load() != 1 {
		t.Fatalf("parked %d at close", c.ParkStats().Parks.Load())
	}
	c2, f2 := newParked(t, dir, 4, Config{})
	if got := tiers(c2); got["parked"] != 1 {
		t.Fatalf("after restart: %v", got)
	}
	if cached := serve(t, c2, f2, cat(conv, seqOf(900, 5)), nil); cached != 130 {
		t.Fatalf("cached %d after restart, want 130", cached)
	}
}

func TestLongerParkedStreamIsCutToTheMatch(t *testing.T) {
	dir := t.TempDir()
	c, f := newParked(t, dir, 2, Config{})
	serve(t, c, f, seqOf(1, 100), nil)
	c.Close()
	c2, f2 := newParked(t, dir, 2, Config{})
	// Shares 60 tokens, then diverges: the 100-token stream is imported
	// and truncated to 60.
	if cached := serve(t, c2, f2, cat(seqOf(1, 60), seqOf(900, 10)), nil); cached != 60 {
		t.Fatalf("cached %d, want 60", cached)
	}
	// The same prompt as the parked stream: all but its last token.
	if cached := serve(t, c2, f2, seqOf(1, 100), nil); cached != 99 {
		t.Fatalf("cached %d, want 99", cached)
	}
	// An engine that cannot truncate inside a sequence can only use a
	// parked stream whole.
	dir3 := t.TempDir()
	c3, f3 := newParked(t, dir3, 2, Config{})
	serve(t, c3, f3, seqOf(1, 100), nil)
	c3.Close()
	f4 := newFakeEngine(2)
	f4.desc.PartialTruncation = false
	c4, err := New(f4, Config{Seqs: 2, Park: openPark(t, dir3)})
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if cached := serve(t, c4, f4, cat(seqOf(1, 60), seqOf(900, 10)), nil); cached != 0 || f4.imports != 0 {
		t.Fatalf("cached %d with %d imports on an engine without partial truncation", cached, f4.imports)
	}
	if cached := serve(t, c4, f4, cat(seqOf(1, 100), seqOf(900, 10)), nil); cached != 100 {
		t.Fatalf("whole stream: cached %d", cached)
	}
}

// A damaged file is refused, removed and counted, and the prompt falls
// back to the next best entry: here a shorter parked prefix.
func TestRefusedFileFallsBackToTheNextBest(t *testing.T) {
	dir := t.TempDir()
	c, f := newParked(t, dir, 4, Config{})
	short := seqOf(1, 80)
	long := cat(short, seqOf(300, 40))
	serve(t, c, f, short, nil)
	c.Close()
	c, f = newParked(t, dir, 4, Config{})
	// Park the longer stream beside it without superseding: a separate
	// store write, as a second server run might leave.
	c.park.Put(long, mustExport(t, long), nil)
	c.Close()
	path := filepath.Join(c.park.Dir(), park.Name(long))
	b, _ := os.ReadFile(path)
	b[len(b)-3] ^= 0x10
	os.WriteFile(path, b, 0o644)

	c, f = newParked(t, dir, 4, Config{})
	if got := tiers(c); got["parked"] != 2 {
		t.Fatalf("tiers %v", got)
	}
	if cached := serve(t, c, f, cat(long, seqOf(900, 3)), nil); cached != 80 {
		t.Fatalf("cached %d, want the 80-token fallback", cached)
	}
	if c.ParkStats().Refused[park.ReasonPayload].Load() != 1 || c.Stats().ParkFailures.Load() != 1 {
		t.Fatal("refusal not counted")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("the refused file is still there")
	}
}

func mustExport(t *testing.T, toks []engine.Token) []byte {
	f := newFakeEngine(1)
	f.fill(0, toks)
	b, _ := f.Export(0, nil)
	return b
}

// A file the engine will not import is read once: later matches admit
// cold without reading, checksumming or decompressing it again, and the
// failure is counted once. It stays on disk (the pool may only have been
// short of cells), and the next run restores it.
func TestImportFailureIsNotRetriedInTheRunButKeepsTheFile(t *testing.T) {
	dir := t.TempDir()
	c, f := newParked(t, dir, 2, Config{})
	conv := seqOf(1, 100)
	serve(t, c, f, conv, nil)
	c.Close()
	c, f = newParked(t, dir, 2, Config{})
	f.importErr = engine.ErrState // e.g. the pool had no room for it
	for i := range 3 {
		if cached := match(t, c, cat(conv, seqOf(900+10*i, 3))); cached != 0 {
			t.Fatalf("match %d: cached %d", i, cached)
		}
	}
	if n := c.ParkStats().Reads.Load(); n != 1 {
		t.Fatalf("the file was read %d times for 3 matches", n)
	}
	if c.Stats().ParkFailures.Load() != 1 || c.ParkStats().Files.Load() != 1 {
		t.Fatalf("failures %d, files %d: the file should be kept and the failure counted once", c.Stats().ParkFailures.Load(), c.ParkStats().Files.Load())
	}
	if got := tiers(c); got["parked"] != 0 {
		t.Fatalf("tiers %v: the unusable file is still an entry", got)
	}
	if _, err := os.Stat(filepath.Join(c.park.Dir(), park.Name(conv))); err != nil {
		t.Fatalf("the file is gone: %v", err)
	}
	c.Close()
	c, f = newParked(t, dir, 2, Config{})
	if cached := serve(t, c, f, cat(conv, seqOf(950, 3)), nil); cached != 100 {
		t.Fatalf("the next run cached %d", cached)
	}
}

// match acquires a sequence for prompt and gives it back unused, as a
// request that ends before its prefill does: nothing is published.
func match(t *testing.T, c *Cache, prompt []engine.Token) int {
	t.Helper()
	seq, cached, err := c.Acquire(prompt)
	if err != nil {
		t.Fatal(err)
	}
	c.Release(seq, nil)
	return cached
}

// A damaged file is read once: refused, counted and removed; when its
// removal did not take (here: a copy put back by hand) no later match
// reads it again in this run.
func TestRefusedFileIsReadOnce(t *testing.T) {
	dir := t.TempDir()
	c, f := newParked(t, dir, 2, Config{})
	conv := seqOf(1, 100)
	serve(t, c, f, conv, nil)
	c.Close()
	c, f = newParked(t, dir, 2, Config{})
	path := filepath.Join(c.park.Dir(), park.Name(conv))
	b, _ := os.ReadFile(path)
	b[len(b)-2] ^= 0x20
	os.WriteFile(path, b, 0o644)
	if cached := match(t, c, cat(conv, seqOf(900, 3))); cached != 0 {
		t.Fatalf("cached %d", cached)
	}
	os.WriteFile(path, b, 0o644)
	if cached := match(t, c, cat(conv, seqOf(920, 3))); cached != 0 {
		t.Fatalf("cached %d", cached)
	}
	// Asked for the name directly, the store answers from memory.
	if _, err := c.park.Load(conv, nil); !errors.Is(err, park.ErrRefused) {
		t.Fatalf("second load: %v", err)
	}
	if n := c.ParkStats().Reads.Load(); n != 1 {
		t.Fatalf("read %d times", n)
	}
	if n := c.ParkStats().Refused[park.ReasonPayload].Load(); n != 1 {
		t.Fatalf("refusal counted %d times", n)
	}
	// A fresh state for the stream replaces the refused file.
	c.park.Put(conv, mustExport(t, conv), nil)
	c.Close()
	c, f = newParked(t, dir, 2, Config{})
	if cached := serve(t, c, f, cat(conv, seqOf(950, 3)), nil); cached != 100 {
		t.Fatalf("after a fresh write: cached %d", cached)
	}
}

func TestEagerParksEachRetiringLaneAndSupersedesItsLastTurn(t *testing.T) {
	dir := t.TempDir()
	c, f := newParked(t, dir, 4, Config{ParkEager: true})
	turn1 := seqOf(1, 100)
	serve(t, c, f, turn1, seqOf(500, 20))
	waitWritten(t, c, 1)
	turn2 := cat(turn1, seqOf(500, 20), seqOf(700, 10))
	serve(t, c, f, turn2, seqOf(800, 10))
	waitWritten(t, c, 2)
	if c.ParkStats().Superseded.Load() != 1 {
		t.Fatal("turn 1's file was not superseded by turn 2's")
	}
	c.tidy()
	if got := tiers(c); got["parked"] != 1 || got["resident"] != 1 {
		t.Fatalf("tiers %v", got)
	}
	if l := c.park.List(); len(l) != 1 || len(l[0].Tokens) != len(turn2)+10 {
		t.Fatalf("files %+v", l)
	}
}

func TestIdleEntriesAreParkedAndEvicted(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	c, f := newParked(t, t.TempDir(), 4, Config{ParkIdle: 5 * time.Minute, Now: clock, HostBytes: 1 << 20})
	conv := seqOf(1, 100)
	serve(t, c, f, conv, nil)
	tiny := seqOf(5000, 5)
	serve(t, c, f, tiny, nil)
	now = now.Add(4 * time.Minute)
	serve(t, c, f, seqOf(3000, 70), nil) // used at 4 min
	if got := tiers(c); got["resident"] != 3 {
		t.Fatalf("before the keep-alive: %v", got)
	}
	defer func() {
		if got := tiers(c); got["parked"] != 1 {
			t.Errorf("tiers at the end %v", got)
		}
	}()
	now = now.Add(2 * time.Minute) // conv and tiny idle 6 min, the other 2
	c.Tidy()                       // as any Acquire, Release or Relieve does
	if c.Stats().IdleParks.Load() != 2 {
		t.Fatalf("idle parks %d", c.Stats().IdleParks.Load())
	}
	waitWritten(t, c, 1)
	if got := tiers(c); got["resident"] != 1 || got["parked"] != 1 || len(c.free) != 3 {
		t.Fatalf("after the keep-alive: %v, %d free sequences: %+v", got, len(c.free), c.Entries())
	}
	if cached := serve(t, c, f, cat(conv, seqOf(900, 3)), nil); cached != 100 {
		t.Fatalf("resumed idle conversation cached %d", cached)
	}
}

func TestGoneFilesLeaveTheIndex(t *testing.T) {
	dir := t.TempDir()
	c, f := newParked(t, dir, 4, Config{})
	serve(t, c, f, seqOf(1, 100), nil)
	c.Close()
	c, f = newParked(t, dir, 4, Config{})
	os.Remove(filepath.Join(c.park.Dir(), park.Name(seqOf(1, 100))))
	// The restore finds the file gone: cold, and the entry dropped.
	if cached := serve(t, c, f, cat(seqOf(1, 100), seqOf(900, 3)), nil); cached != 0 {
		t.Fatalf("cached %d", cached)
	}
	if got := tiers(c); got["parked"] != 0 {
		t.Fatalf("tiers %v", got)
	}
}

func TestViewAndParkInfo(t *testing.T) {
	c, f := newParked(t, t.TempDir(), 2, Config{ParkEager: true})
	serve(t, c, f, seqOf(1, 100), nil)
	waitWritten(t, c, 1)
	v := c.View()
	var tiersSeen []string
	for _, e := range v {
		tiersSeen = append(tiersSeen, e.Tier)
	}
	slices.Sort(tiersSeen)
	if !slices.Equal(tiersSeen, []string{"parked", "resident"}) || v[0].Tokens != 100 {
		t.Fatalf("view %+v", v)
	}
	info := c.ParkInfo()
	if !info.Enabled || !info.Eager || info.Lossy || info.Files != 1 || info.Bytes <= 0 {
		t.Fatalf("info %+v", info)
	}
	off, _ := New(newFakeEngine(1), Config{Seqs: 1})
	if off.ParkInfo().Enabled || off.ParkStats() != nil || off.Close() != nil {
		t.Fatal("park off")
	}
	if _, err := New(newFakeEngine(1), Config{Seqs: 1, ParkEager: true}); err == nil {
		t.Fatal("eager parking without a store accepted")
	}
}

// fakeSpaces names namespaces by their first token's thousand: what the
// scheduler's tagging does by its own arithmetic.
type fakeSpaces map[engine.Token]engine.AdapterSetID

func (f fakeSpaces) SetOf(first engine.Token) (engine.AdapterSetID, bool) {
	if first >= 0 {
		return engine.AdapterSetID{}, true
	}
	set, ok := f[first/1000]
	return set, ok
}

// A stream in an adapter set's namespace parks naming its set: after a
// restart it restores while its namespace names that set, and never when
// the namespace names another (its file stays for a run that has the set).
// A stream in a namespace that names no set is cached but never parked.
// Dropping a namespace removes its entries and files.
func TestNamespacedStreamsParkUnderTheirSet(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	dir := t.TempDir()
	setA := engine.AdapterSetOf([]string{"a"}, []float32{1})
	setB := engine.AdapterSetOf([]string{"b"}, []float32{1})
	c, f := newParked(t, dir, 2, Config{ParkIdle: 5 * time.Minute, Now: clock})
	c.UseNamespaces(fakeSpaces{-5: setA}.SetOf)
	tagged := seqOf(-5000, 100)  // set A's namespace
	unbound := seqOf(-8000, 100) // a namespace naming no set
	turn2 := cat(tagged, seqOf(-4000, 10), seqOf(-4500, 5))
	serve(t, c, f, tagged, seqOf(-4000, 10))
	if cached := serve(t, c, f, turn2, nil); cached != 110 {
		t.Fatalf("the set's stream served %d tokens, want 110", cached)
	}
	serve(t, c, f, unbound, nil)
	serve(t, c, f, seqOf(1, 100), nil)
	now = now.Add(10 * time.Minute)
	c.Tidy()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.ParkStats().Parks.Load(); n != 2 {
		t.Errorf("%d streams parked, want the set's and the base one", n)
	}

	c2, f2 := newParked(t, dir, 2, Config{})
	c2.UseNamespaces(fakeSpaces{-5: setB}.SetOf) // the namespace now names B
	if cached := serve(t, c2, f2, cat(tagged, seqOf(-4000, 3)), nil); cached != 0 {
		t.Errorf("set B restored %d tokens of set A's stream", cached)
	}
	c2.Close()

	c3, f3 := newParked(t, dir, 2, Config{})
	c3.UseNamespaces(fakeSpaces{-5: setA}.SetOf)
	// B's stream parked at c2's close: both sets have a file keyed in the
	// namespace, the most recently used first.
	if ps := parkedSets(c3); len(ps) != 2 || ps[0] != setB || ps[1] != setA {
		t.Fatalf("parked sets %v", ps)
	}
	if cached := serve(t, c3, f3, turn2, nil); cached != len(turn2)-1 {
		t.Errorf("set A restored %d tokens after a restart, want %d", cached, len(turn2)-1)
	}
	if cached := serve(t, c3, f3, cat(unbound, seqOf(-7000, 3)), nil); cached != 0 {
		t.Errorf("an unbound namespace's stream came back from disk: %d tokens", cached)
	}
	c3.DropNamespace(func(first engine.Token) bool { return first/1000 == -5 })
	if ps := parkedSets(c3); len(ps) != 0 {
		t.Errorf("parked sets after dropping their namespace: %+v", ps)
	}
	if cached := serve(t, c3, f3, turn2, nil); cached != 0 {
		t.Errorf("a dropped namespace served %d tokens", cached)
	}
	if names := parkedNames(c3); len(names) != 1 {
		t.Errorf("park files after the drop: %v, want the base one", names)
	}
}

// parkedSets are the sets EachParkedSet gives, all keyed at -5000.
func parkedSets(c *Cache) []engine.AdapterSetID {
	var out []engine.AdapterSetID
	c.EachParkedSet(func(set engine.AdapterSetID, first engine.Token) {
		if first == -5000 {
			out = append(out, set)
		}
	})
	return out
}

func parkedNames(c *Cache) []string {
	var out []string
	for _, m := range c.park.List() {
		out = append(out, m.Name)
	}
	return out
}
