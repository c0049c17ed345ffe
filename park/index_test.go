package park

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartUpIndexesHeadersAndRemovesTemporaries(t *testing.T) {
	dir := t.TempDir()
	a, _ := parked(t, dir, toks(1, 30), 1)
	parked(t, dir, toks(100, 50), 2)
	// A flipped payload byte is not seen at start-up: only headers are read.
	mutate(t, a, func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })
	tmp := filepath.Join(subdir(dir), Name(toks(7, 7))+".tmp12345")
	os.WriteFile(tmp, []byte("half a write"), 0o644)
	other := filepath.Join(subdir(dir), "README")
	os.WriteFile(other, []byte("not ours"), 0o644)

	s := open(t, testConfig(dir))
	if n := len(s.List()); n != 2 {
		t.Fatalf("indexed %d", n)
	}
	if s.Stats().StaleTemps.Load() != 1 {
		t.Fatal("temporary file not counted")
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatal("temporary file left")
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("a file that is not ours was touched")
	}
	if s.Stats().Files.Load() != 2 || s.Stats().Bytes.Load() <= 0 {
		t.Fatal("gauges")
	}
	for _, m := range s.List() {
		if len(m.Tokens) != 30 && len(m.Tokens) != 50 {
			t.Fatalf("meta %+v", m)
		}
	}
}

func TestOneServerPerDirectory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, testConfig(dir))
	if s2, err := Open(testConfig(dir)); err == nil || !strings.Contains(err.Error(), "in use") {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second open: %v", err)
	}
	s.Close()
	s2 := open(t, testConfig(dir))
	s2.Close()
}
