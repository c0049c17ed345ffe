package kv

import (
	"fmt"
	"slices"
	"testing"

	"superfluid/engine"
)

// windowEngine is a sliding-window fake: a sequence holds its window's
// cells only for its last window tokens (as llama.cpp reuses the cells
// that left every window), so a copy or cut below MinCut leaves a
// sequence holding nothing, as the native engine's did before the cache
// knew (issue 22). Checkpoints are the test's to place.
type windowEngine struct {
	*fakeEngine
	window  int
	minCut  []int                 // per sequence
	broken  []bool                // cut below the window: holds its tokens' full cells, reports none
	ckpts   [][]engine.Checkpoint // what the engine took as lanes prefilled
	restore int                   // checkpoint restores
	handed  int                   // checkpoints TakeCheckpoints copied out
}

func newWindowEngine(n, window int) *windowEngine {
	f := newFakeEngine(n)
	f.desc.PartialTruncation = false
	f.desc.Partial = engine.PartialSWA
	f.desc.SlidingWindow = window
	return &windowEngine{fakeEngine: f, window: window, minCut: make([]int, n), broken: make([]bool, n), ckpts: make([][]engine.Checkpoint, n)}
}

func (w *windowEngine) MinCut(seq int32) int { return w.minCut[seq] }

func (w *windowEngine) CheckpointPositions(seq int32) ([]int, error) {
	var pos []int
	for _, cp := range w.ckpts[seq] {
		pos = append(pos, cp.Pos)
	}
	return pos, nil
}

func (w *windowEngine) TakeCheckpoints(seq int32, want []int) ([]engine.Checkpoint, error) {
	var out []engine.Checkpoint
	for _, cp := range w.ckpts[seq] {
		if slices.Contains(want, cp.Pos) {
			out = append(out, cp)
			w.handed++
		}
	}
	w.ckpts[seq] = nil
	return out, nil
}

func (w *windowEngine) RestoreCheckpoint(seq int32, cp engine.Checkpoint) error {
	if string(cp.Blob) != fmt.Sprint("cp@", cp.Pos) || len(w.seqs[seq]) < cp.Pos {
		w.Free(seq)
		return engine.ErrState
	}
	w.restore++
	w.seqs[seq] = w.seqs[seq][:cp.Pos]
	w.minCut[seq] = 0
	w.broken[seq] = false
	return nil
}

// The window's cells are only there for the stream's last window tokens.
func (w *windowEngine) settle(seq int32) { w.minCut[seq] = max(0, len(w.seqs[seq])-w.window) }

func (w *windowEngine) CopyPrefix(src, dst int32, n int) error {
	if err := w.fakeEngine.CopyPrefix(src, dst, n); err != nil {
		return err
	}
	w.broken[dst] = n < w.minCut[src] // the native engine's copy held 0 tokens
	w.minCut[dst] = w.minCut[src]
	return nil
}

func (w *windowEngine) SeqLen(seq int32) int {
	if w.broken[seq] {
		return 0
	}
	return w.fakeEngine.SeqLen(seq)
}

func (w *windowEngine) Truncate(seq int32, keep int) error {
	if keep < w.minCut[seq] && keep < len(w.seqs[seq]) {
		w.broken[seq] = true
	}
	return w.fakeEngine.Truncate(seq, keep)
}

func (w *windowEngine) Free(seq int32) error {
	w.minCut[seq] = 0
	w.broken[seq] = false
	w.ckpts[seq] = nil
	return w.fakeEngine.Free(seq)
}

func (w *windowEngine) Import(seq int32, data []byte) (int, error) {
	n, err := w.fakeEngine.Import(seq, data)
	w.settle(seq)
	return n, err
}

func checkpointAt(pos int) engine.Checkpoint {
	return engine.Checkpoint{Pos: pos, Blob: []byte(fmt.Sprint("cp@", pos))}
}

// serveWindow is serve for the window engine: the lane's prefill leaves
// the window's cells at the stream's end and the checkpoints given.
func serveWindow(t *testing.T, c *Cache, w *windowEngine, prompt []engine.Token, cps ...int) int {
	t.Helper()
	seq, cached, err := c.Acquire(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.seqs[seq]; !slices.Equal(got, prompt[:cached]) {
		t.Fatalf("sequence holds %d tokens, want the %d-token prefix", len(got), cached)
	}
	if cached > 0 && w.SeqLen(seq) != cached {
		t.Fatalf("the sequence reports %d tokens, the seed %d", w.SeqLen(seq), cached)
	}
	w.fill(seq, prompt)
	w.settle(seq)
	for _, p := range cps {
		w.ckpts[seq] = append(w.ckpts[seq], checkpointAt(p))
	}
	c.Release(seq, prompt)
	return cached
}

// A prompt leaving a cached stream further back than the window reaches
// is admitted cold, counted, never refused; one leaving it within the
// window is cut there.
func TestWindowCutRefusedFallsBackCold(t *testing.T) {
	w := newWindowEngine(4, 100)
	c, _ := New(w, Config{Seqs: 4})
	base := seqOf(1, 1000)
	serveWindow(t, c, w, base)
	if cached := serveWindow(t, c, w, cat(base[:500], seqOf(5000, 50))); cached != 0 {
		t.Fatalf("diverging 500 tokens back: cached %d, want a cold prefill", cached)
	}
	if n := c.Stats().CutRefusals.Load(); n != 1 {
		t.Fatalf("%d cut refusals counted, want 1", n)
	}
	if cached := serveWindow(t, c, w, cat(base[:950], seqOf(6000, 50))); cached != 950 {
		t.Fatalf("diverging inside the window: cached %d, want 950", cached)
	}
	if n := c.Stats().SeedMismatches.Load(); n != 0 {
		t.Fatalf("%d seeds did not hold what they said", n)
	}
}

// The refused cut falls back to a shorter cached prefix when one is
// resident: another stream sharing less.
func TestWindowCutRefusedFallsBackToAShorterEntry(t *testing.T) {
	w := newWindowEngine(4, 100)
	c, _ := New(w, Config{Seqs: 4})
	system := seqOf(1, 300)
	serveWindow(t, c, w, cat(system, seqOf(1000, 10))) // whole: a cut at 300 is valid
	long := cat(system, seqOf(2000, 700))
	serveWindow(t, c, w, long)
	if cached := serveWindow(t, c, w, cat(long[:600], seqOf(3000, 10))); cached != 300 {
		t.Fatalf("cached %d, want the 300 tokens the short entry can give", cached)
	}
}

// A divergence before the window resumes from the last checkpoint at or
// before it; the lane's stream carries the checkpoints on, so the next
// divergence further back resumes too.
func TestDivergingPromptResumesFromACheckpoint(t *testing.T) {
	w := newWindowEngine(4, 100)
	c, _ := New(w, Config{Seqs: 4})
	base := seqOf(1, 1000)
	serveWindow(t, c, w, base, 256, 512, 768, 1000)
	second := cat(base[:600], seqOf(5000, 200))
	if cached := serveWindow(t, c, w, second, 800); cached != 512 {
		t.Fatalf("diverging at 600: cached %d, want the checkpoint at 512", cached)
	}
	if c.Stats().CheckpointResumes.Load() != 1 || w.restore != 1 || c.Stats().CutRefusals.Load() != 0 {
		t.Fatalf("resumes %d, restores %d, refusals %d", c.Stats().CheckpointResumes.Load(), w.restore, c.Stats().CutRefusals.Load())
	}
	// The second stream inherited 256 and 512 from the first.
	if cached := serveWindow(t, c, w, cat(second[:650], seqOf(7000, 10))); cached != 512 {
		t.Fatalf("diverging at 650 of the second stream: cached %d, want 512", cached)
	}
	if cached := serveWindow(t, c, w, cat(second[:300], seqOf(8000, 10))); cached != 256 {
		t.Fatalf("diverging at 300: cached %d, want 256", cached)
	}
}

// Checkpoints follow an entry into host memory and resume from there.
func TestHostEntryResumesFromACheckpoint(t *testing.T) {
	w := newWindowEngine(2, 100)
	c, _ := New(w, Config{Seqs: 2, HostBytes: 1 << 20, MinHostTokens: 16})
	base := seqOf(1, 1000)
	serveWindow(t, c, w, base, 400, 800)
	s1, _, _ := c.Acquire(seqOf(20000, 5))
	s2, _, _ := c.Acquire(seqOf(30000, 5))
	c.Release(s1, nil)
	c.Release(s2, nil)
	if got := tiers(c); got["host"] != 1 {
		t.Fatalf("tiers %v, want the stream in host memory", got)
	}
	if cached := serveWindow(t, c, w, cat(base[:850], seqOf(5000, 10))); cached != 800 {
		t.Fatalf("cached %d from host memory, want the checkpoint at 800", cached)
	}
	// Without a checkpoint before the divergence: cold, and the host
	// entry stays for the prompts it can serve.
	if cached := serveWindow(t, c, w, cat(base[:300], seqOf(6000, 10))); cached != 0 {
		t.Fatalf("cached %d, want cold", cached)
	}
	if c.Stats().CutRefusals.Load() == 0 {
		t.Fatal("the refused cut was not counted")
	}
}

// brokenCopyEngine's copies hold nothing: the engine disagrees with what
// the cache believed.
type brokenCopyEngine struct{ *fakeEngine }

func (b brokenCopyEngine) CopyPrefix(src, dst int32, n int) error {
	b.seqs[dst] = nil
	return nil
}

// A seed that does not hold what it says is reset before admission: the
// lane prefills cold, counted, and the plan never names cached tokens the
// sequence lacks.
func TestUnsoundSeedIsAdmittedCold(t *testing.T) {
	f := newFakeEngine(4)
	c, _ := New(brokenCopyEngine{f}, Config{Seqs: 4})
	base := seqOf(1, 200)
	serve(t, c, f, base, nil)
	seq, cached, err := c.Acquire(cat(base, seqOf(900, 5)))
	if err != nil || cached != 0 || len(f.seqs[seq]) != 0 {
		t.Fatalf("cached %d holding %d, err %v: want a cold admission", cached, len(f.seqs[seq]), err)
	}
	if c.Stats().SeedMismatches.Load() != 1 {
		t.Fatal("the mismatch was not counted")
	}
}

func TestMergeCheckpointsKeepsTheLatest(t *testing.T) {
	a := []engine.Checkpoint{checkpointAt(1), checkpointAt(3)}
	b := []engine.Checkpoint{checkpointAt(2), {Pos: 3, Blob: []byte("new")}, checkpointAt(4)}
	got := mergeCheckpoints(a, b, 3)
	if len(got) != 3 || got[0].Pos != 2 || got[1].Pos != 3 || string(got[1].Blob) != "new" || got[2].Pos != 4 {
		t.Fatalf("merged %v", got)
	}
	if cp, ok := latestCheckpoint(got, 3); !ok || cp.Pos != 3 {
		t.Fatalf("latest at 3: %v %v", cp, ok)
	}
	if _, ok := latestCheckpoint(got, 1); ok {
		t.Fatal("a checkpoint after the depth")
	}
}

// Checkpoints are parked with their stream and resume it after a restart.
func TestParkedCheckpointsResumeAfterARestart(t *testing.T) {
	dir := t.TempDir()
	w := newWindowEngine(4, 100)
	c, err := New(w, Config{Seqs: 4, Park: openPark(t, dir), MinHostTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	base := seqOf(1, 1000)
	serveWindow(t, c, w, base, 300, 600, 900)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	w = newWindowEngine(4, 100)
	c, err = New(w, Config{Seqs: 4, Park: openPark(t, dir), MinHostTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if cached := serveWindow(t, c, w, cat(base[:700], seqOf(5000, 10))); cached != 600 {
		t.Fatalf("after a restart, diverging at 700: cached %d, want the parked checkpoint at 600", cached)
	}
	if c.Stats().ParkHits.Load() != 1 || c.Stats().CheckpointResumes.Load() != 1 {
		t.Fatalf("park hits %d, checkpoint resumes %d", c.Stats().ParkHits.Load(), c.Stats().CheckpointResumes.Load())
	}
	// The resumed lane's stream carries the parked checkpoints on.
	if cached := serveWindow(t, c, w, cat(base[:400], seqOf(6000, 10))); cached != 300 {
		t.Fatalf("diverging at 400: cached %d, want 300", cached)
	}
}

func TestThinCheckpointsKeepsTwoPerSpacingAndTheLast(t *testing.T) {
	var cps []engine.Checkpoint
	for _, p := range []int{100, 150, 700, 710, 1300, 1320} {
		cps = append(cps, checkpointAt(p))
	}
	var got []int
	for _, cp := range thinCheckpoints(cps, 512) {
		got = append(got, cp.Pos)
	}
	if !slices.Equal(got, []int{100, 700, 1300, 1320}) {
		t.Fatalf("kept %v", got)
	}
}

// A sliding-window model's entries are not moved out for the resident
// budget: exported, a stream keeps only its last window and a prompt
// leaving it further back resumes from a checkpoint; resident, with its
// cells still in the pool, it is cut right at the edit (the bench's
// edited conversations, issue 22). A dense model's entries keep to the
// budget.
func TestWindowEntriesStayResidentOverTheBudget(t *testing.T) {
	w := newWindowEngine(8, 100)
	c, _ := New(w, Config{Seqs: 8, MaxResidentTokens: 1000, HostBytes: 1 << 20, MinHostTokens: 16})
	first, second := seqOf(1, 900), seqOf(10000, 900)
	for _, s := range [][]engine.Token{first, second} {
		serveWindow(t, c, w, s, 512)
		n, _ := c.tree.match(s)
		w.minCut[n.resident.seq] = 0 // the pool kept the cells that left the window
	}
	if got := tiers(c); got["resident"] != 2 || got["host"] != 0 {
		t.Fatalf("tiers %v, want both streams resident over a budget of 1000 tokens", got)
	}
	if cached := serveWindow(t, c, w, cat(first[:765], seqOf(5000, 100))); cached != 765 {
		t.Fatalf("diverging at 765: cached %d, want all of it", cached)
	}
	if n := c.Stats().CheckpointResumes.Load(); n != 0 {
		t.Fatalf("%d checkpoint resumes, want a plain cut", n)
	}

	f := newFakeEngine(8)
	c, _ = New(f, Config{Seqs: 8, MaxResidentTokens: 1000, HostBytes: 1 << 20, MinHostTokens: 16})
	serve(t, c, f, first, nil)
	serve(t, c, f, second, nil)
	if got := tiers(c); got["resident"] != 1 || got["host"] != 1 {
		t.Fatalf("dense model: tiers %v, want one stream moved to host memory", got)
	}
}

// Over their own bound, a sliding-window model's entries leave the pool
// least recently used first: the stream the last prompt used stays and
// can still be cut anywhere, an older one goes to host memory.
func TestWindowEntriesHeldToTheirOwnBound(t *testing.T) {
	w := newWindowEngine(8, 100)
	c, _ := New(w, Config{Seqs: 8, MaxResidentTokens: 100, MaxWindowResidentTokens: 2000, HostBytes: 1 << 20, MinHostTokens: 16})
	streams := [][]engine.Token{seqOf(1, 900), seqOf(10000, 900), seqOf(20000, 900)}
	for i, s := range streams[:2] {
		serveWindow(t, c, w, s, 512)
		n, _ := c.tree.match(s)
		w.minCut[n.resident.seq] = 0 // the pool kept the cells that left the window
		if i == 1 {
			// The first stream's next turn: the second is now the older.
			streams[0] = cat(streams[0], seqOf(30000, 50))
			if cached := serveWindow(t, c, w, streams[0]); cached != 900 {
				t.Fatalf("the first stream's next turn: cached %d, want 900", cached)
			}
			n, _ := c.tree.match(streams[0])
			w.minCut[n.resident.seq] = 0
		}
	}
	serveWindow(t, c, w, streams[2], 512)
	if got := tiers(c); got["resident"] != 2 || got["host"] != 1 {
		t.Fatalf("tiers %v, want two streams resident in 2,000 tokens (1,850) and one in host memory", got)
	}
	if n := c.Stats().Evictions.Load(); n != 1 {
		t.Fatalf("%d evictions, want 1", n)
	}
	if n, _ := c.tree.match(streams[1]); n.resident != nil {
		t.Fatal("the least recently used stream is still resident")
	}
	if cached := serveWindow(t, c, w, cat(streams[0][:765], seqOf(5000, 100))); cached != 765 {
		t.Fatalf("the stream kept, diverging at 765: cached %d, want all of it", cached)
	}
}

// A fresh sliding-window entry over the bound stays: nobody has matched it
// yet, so the victim order would take it before an older conversation
// whose edit shared its prefix, and its own edit would then resume from a
// checkpoint.
func TestFreshWindowEntryOutlivesOlderSharedOnes(t *testing.T) {
	w := newWindowEngine(8, 100)
	c, _ := New(w, Config{Seqs: 8, MaxResidentTokens: 100, MaxWindowResidentTokens: 1500, HostBytes: 1 << 20, MinHostTokens: 16})
	settled := func(s []engine.Token) {
		n, _ := c.tree.match(s)
		w.minCut[n.resident.seq] = 0 // the pool kept the cells that left the window
	}
	old := seqOf(1, 900)
	serveWindow(t, c, w, old, 512)
	settled(old)
	oldEdit := cat(old[:700], seqOf(7000, 200))
	if cached := serveWindow(t, c, w, oldEdit, 512); cached != 700 {
		t.Fatalf("the old conversation's edit: cached %d, want 700", cached)
	}
	settled(oldEdit)
	// Its next turn: a second match across the first 700 tokens.
	oldTurn := cat(oldEdit, seqOf(8000, 50))
	if cached := serveWindow(t, c, w, oldTurn, 512); cached != 900 {
		t.Fatalf("the old conversation's next turn: cached %d, want 900", cached)
	}
	settled(oldTurn)
	fresh := seqOf(10000, 900)
	serveWindow(t, c, w, fresh, 512)
	if n, _ := c.tree.match(fresh); n.resident == nil {
		t.Fatalf("the fresh stream left the pool (tiers %v)", tiers(c))
	}
	settled(fresh)
	if cached := serveWindow(t, c, w, cat(fresh[:765], seqOf(5000, 100))); cached != 765 {
		t.Fatalf("the fresh stream edited at 765: cached %d, want all of it", cached)
	}
	if n := c.Stats().CheckpointResumes.Load(); n != 0 {
		t.Fatalf("%d checkpoint resumes, want a plain cut", n)
	}
}

// A retiring lane's checkpoints are chosen by position before any is
// copied out of the engine: those the thinning drops, and all of a
// stream already cached inside a longer entry, never cross.
func TestReleaseCopiesOnlyTheCheckpointsItKeeps(t *testing.T) {
	w := newWindowEngine(4, 100)
	w.desc.CheckpointEvery = 512 // thinned to one per 256 tokens
	c, _ := New(w, Config{Seqs: 4})
	long := seqOf(1, 1100)
	serveWindow(t, c, w, long, 256, 300, 512, 600, 1024, 1100)
	n, _ := c.tree.match(long)
	var kept []int
	for _, cp := range n.resident.ckpts {
		kept = append(kept, cp.Pos)
	}
	if !slices.Equal(kept, []int{256, 512, 1024, 1100}) || w.handed != 4 {
		t.Fatalf("kept %v, %d copied out of the engine; want 4: 300 and 600 thinned away uncopied", kept, w.handed)
	}
	if b := c.Stats().CheckpointBytesCopied.Load(); b != int64(len("cp@256cp@512cp@1024cp@1100")) {
		t.Fatalf("%d checkpoint bytes counted", b)
	}
	// A prompt inside the long stream: its lane's stream adds nothing.
	serveWindow(t, c, w, long[:900], 900)
	if w.handed != 4 {
		t.Fatalf("%d checkpoints copied out, want none more for a stream cached inside a longer one", w.handed)
	}
}

// With a host tier, a sliding-window model's entries stay in the pool over
// the idle budget while their own conversation goes on (published fresh,
// seeded from), and go to host memory as soon as another conversation's
// prompt is admitted: resident, their cells would widen the attention of
// every step of that prompt (issue 22).
func TestWindowEntryLeavesThePoolWhenAnotherPromptIsAdmitted(t *testing.T) {
	w := newWindowEngine(8, 100)
	c, _ := New(w, Config{Seqs: 8, MaxResidentTokens: 100, MaxWindowResidentTokens: 100, HostBytes: 1 << 20, MinHostTokens: 16})
	first := seqOf(1, 900)
	serveWindow(t, c, w, first, 512)
	if got := tiers(c); got["resident"] != 1 {
		t.Fatalf("tiers %v after publishing, want the fresh entry resident over the budget", got)
	}
	n, _ := c.tree.match(first)
	w.minCut[n.resident.seq] = 0 // the pool kept the cells that left the window

	// The conversation's own edit cuts it where it diverges, and both
	// streams stay: the original's next turn may still come.
	edited := cat(first[:765], seqOf(5000, 100))
	if cached := serveWindow(t, c, w, edited); cached != 765 {
		t.Fatalf("the conversation's own edit: cached %d, want a cut at 765", cached)
	}
	if got := tiers(c); got["resident"] != 2 || got["host"] != 0 {
		t.Fatalf("tiers %v after the edit, want the edit and the stream it was seeded from resident", got)
	}
	// The original's next turn, re-rendered a few tokens before its end.
	if cached := serveWindow(t, c, w, cat(first[:890], seqOf(6000, 20))); cached != 890 {
		t.Fatalf("the original's next turn: cached %d, want a cut at 890", cached)
	}

	seq, cached, err := c.Acquire(seqOf(20000, 900))
	if err != nil {
		t.Fatal(err)
	}
	if cached != 0 {
		t.Fatalf("an unrelated prompt: cached %d", cached)
	}
	if got := tiers(c); got["resident"] != 0 || got["host"] < 2 {
		t.Fatalf("tiers %v while another conversation's prompt runs, want the first one's streams in host memory", got)
	}
	if r := c.Stats().ResidentTokens.Load(); r != 0 {
		t.Fatalf("resident tokens gauge %d, want 0", r)
	}
	c.Release(seq, nil)
	// The edited stream's next turn comes back from host memory whole.
	if cached := serveWindow(t, c, w, cat(edited, seqOf(7000, 20))); cached != len(edited) {
		t.Fatalf("the edited stream's next turn: cached %d, want %d", cached, len(edited))
	}
}
