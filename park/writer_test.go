package park

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
)

func TestFullQueueDropsAndCounts(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.QueueLen = 1
	s := open(t, cfg)
	g := newGate()
	s.chunkHook = g.hook
	defer g.open()
	blob := stateBlob(50, 1, 64, true, ggmlF16, 1)
	if !s.Put(toks(1, 50), blob, nil) {
		t.Fatal("first put dropped")
	}
	<-g.entered // the writer holds the first write
	if !s.Put(toks(2, 50), blob, nil) {
		t.Fatal("second put dropped with room in the queue")
	}
	if !s.Busy(int64(len(blob))) {
		t.Fatal("a full queue is not busy: the owner would export only to drop")
	}
	if s.Put(toks(3, 50), blob, nil) {
		t.Fatal("third put accepted past a full queue")
	}
	if !s.Put(toks(1, 50), blob, nil) {
		t.Fatal("a put of what is already queued should report it parked")
	}
	// What is queued can be restored before it reaches the disk.
	if got, err := s.Load(toks(2, 50), nil); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("load of a queued write: %v", err)
	}
	g.open()
	s.Close()
	st := s.Stats()
	if st.Dropped.Load() != 2 || st.Queued.Load() != 2 || st.Parks.Load() != 2 {
		t.Fatalf("dropped %d queued %d parks %d", st.Dropped.Load(), st.Queued.Load(), st.Parks.Load())
	}
}

func TestQueueBytesBound(t *testing.T) {
	cfg := testConfig(t.TempDir())
	blob := stateBlob(50, 1, 64, true, ggmlF16, 1)
	cfg.QueueBytes = int64(len(blob)) + 10
	s := open(t, cfg)
	g := newGate()
	s.chunkHook = g.hook
	defer g.open()
	s.Put(toks(1, 50), blob, nil)
	<-g.entered
	if s.Busy(5) {
		t.Fatal("busy with room for the write")
	}
	if !s.Busy(int64(len(blob))) {
		t.Fatal("not busy past the byte bound")
	}
	if s.Put(toks(2, 50), blob, nil) {
		t.Fatal("accepted past the byte bound")
	}
	if s.Stats().Dropped.Load() != 2 {
		t.Fatal("not counted")
	}
}

// captureLog counts records by level.
type captureLog struct {
	mu     sync.Mutex
	levels []slog.Level
}

func (c *captureLog) Enabled(context.Context, slog.Level) bool { return true }
func (c *captureLog) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.levels = append(c.levels, r.Level)
	c.mu.Unlock()
	return nil
}
func (c *captureLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captureLog) WithGroup(string) slog.Handler      { return c }

func (c *captureLog) count(l slog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.levels {
		if x == l {
			n++
		}
	}
	return n
}

// A directory that turns into a regular file under the server (root runs
// the tests, so a read-only mode would not stop writes): every write
// fails, is counted, is logged once, and the store keeps answering.
func TestFailedWritesAreCountedAndLoggedOnce(t *testing.T) {
	dir := t.TempDir() + "/park"
	cfg := testConfig(dir)
	logs := &captureLog{}
	cfg.Logger = slog.New(logs)
	s := open(t, cfg)
	os.RemoveAll(dir)
	os.WriteFile(dir, []byte("not a directory"), 0o644)
	blob := stateBlob(50, 1, 64, true, ggmlF16, 1)
	for i := range 3 {
		if !s.Put(toks(100*i, 50), blob, nil) {
			t.Fatal("dropped")
		}
	}
	s.Close()
	if n := s.Stats().WriteErrors.Load(); n != 3 {
		t.Fatalf("write errors %d", n)
	}
	if n := logs.count(slog.LevelWarn); n != 1 {
		t.Fatalf("%d warnings for 3 failures", n)
	}
	if g := s.Gone(); len(g) != 3 {
		t.Fatalf("gone %v", g)
	}
	if _, err := s.Load(toks(0, 50), nil); err == nil {
		t.Fatal("loaded what was never written")
	}
}

func TestLongerStreamSupersedesItsPrefix(t *testing.T) {
	s := open(t, testConfig(t.TempDir()))
	short, long := toks(1, 40), toks(1, 90)
	s.Put(short, stateBlob(40, 1, 64, true, ggmlF16, 1), nil)
	s = flush(t, s)
	s.Put(long, stateBlob(90, 1, 64, true, ggmlF16, 2), []string{Name(short)})
	s.Close()
	if s.Stats().Superseded.Load() != 1 {
		t.Fatal("not superseded")
	}
	if g := s.Gone(); !slices.Equal(g, []string{Name(short)}) {
		t.Fatalf("gone %v", g)
	}
	s = open(t, s.cfg)
	if l := s.List(); len(l) != 1 || l[0].Name != Name(long) {
		t.Fatalf("index %+v", l)
	}
}

func TestPutAfterCloseIsRefused(t *testing.T) {
	s := open(t, testConfig(t.TempDir()))
	s.Close()
	if s.Put(toks(1, 5), []byte{1}, nil) || s.PutWait(toks(1, 5), []byte{1}, nil) {
		t.Fatal("put after close")
	}
}
