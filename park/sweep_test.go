package park

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func dirBytes(t *testing.T, dir string) int64 {
	ents, _ := os.ReadDir(subdir(dir))
	var n int64
	for _, e := range ents {
		if isName(e.Name()) {
			info, _ := e.Info()
			n += info.Size()
		}
	}
	return n
}

func TestSweepKeepsTheDirectoryUnderBudgetOldestFirst(t *testing.T) {
	dir := t.TempDir()
	one, _ := parked(t, dir, toks(0, 100), 0)
	st, _ := os.Stat(one)
	size := st.Size()
	os.Remove(one)

	cfg := testConfig(dir)
	cfg.Budget = 3*size + size/2
	s := open(t, cfg)
	base := time.Now().Add(-time.Hour)
	for i := range 3 {
		s.Put(toks(1000*(i+1), 100), stateBlob(100, 2, 64, true, ggmlF16, 0), nil)
		s = flush(t, s)
		p := filepath.Join(subdir(dir), Name(toks(1000*(i+1), 100)))
		os.Chtimes(p, base.Add(time.Duration(i)*time.Minute), base.Add(time.Duration(i)*time.Minute))
	}
	s = flush(t, s) // the index picks up the times
	for i := 3; i < 6; i++ {
		if i == 3 {
			// Restoring the oldest makes it the most recent.
			if _, err := s.Load(toks(1000, 100), nil); err != nil {
				t.Fatal(err)
			}
		}
		s.Put(toks(1000*(i+1), 100), stateBlob(100, 2, 64, true, ggmlF16, 0), nil)
		s = flush(t, s)
		if b := dirBytes(t, dir); b > cfg.Budget {
			t.Fatalf("%d bytes on disk over a budget of %d", b, cfg.Budget)
		}
		if i == 3 {
			// 2000 went, not 1000: the restore made 1000 recent.
			if have := kept(s); len(have) != 3 || !have[1000] || !have[3000] || !have[4000] {
				t.Fatalf("kept %v", have)
			}
		}
	}
	if have := kept(s); len(have) != 3 || !have[4000] || !have[5000] || !have[6000] {
		t.Fatalf("kept %v", have)
	}
	if s.Stats().Files.Load() != 3 {
		t.Fatal("files gauge")
	}
}

func kept(s *Store) map[int]bool {
	have := map[int]bool{}
	for _, m := range s.List() {
		have[int(m.Tokens[0])] = true
	}
	return have
}

func TestSweepAtStartUpAndTooBigFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range 4 {
		parked(t, dir, toks(1000*i, 100), uint64(i))
	}
	total := dirBytes(t, dir)
	cfg := testConfig(dir)
	cfg.Budget = total/2 + 200
	s := open(t, cfg)
	if b := dirBytes(t, dir); b > cfg.Budget || s.Stats().Swept.Load() != 2 {
		t.Fatalf("%d bytes after start-up, swept %d", b, s.Stats().Swept.Load())
	}
	cfg.Budget = 100
	s.Close()
	s = open(t, cfg)
	s.Put(toks(1, 100), stateBlob(100, 2, 64, true, ggmlF16, 0), nil)
	s.Close()
	if s.Stats().TooBig.Load() != 1 || s.Stats().WriteErrors.Load() != 0 {
		t.Fatal("a file larger than the whole budget was not refused as too big")
	}
}
