package park

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"superfluid/engine"
)

// A stream parked under a LoRA adapter set names the set in its header:
// after a restart it restores for that set only. Asked for under another
// set (or the base model) it is refused and left on disk; a header that
// claims another set fails as another set's, never restored.
func TestAdapterSetParksAndRestoresOnlyForItsSet(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	setA := engine.AdapterSetOf([]string{"aa"}, []float32{1})
	setB := engine.AdapterSetOf([]string{"aa"}, []float32{0.5})
	if setA.IsBase() || setA == setB {
		t.Fatalf("set names %s and %s", setA, setB)
	}
	blob := stateBlob(100, 2, 64, true, ggmlF16, 1)
	s := open(t, cfg)
	if !s.PutSet(setA, toks(1, 100), blob, nil, nil, false) {
		t.Fatal("not queued")
	}
	// Queued: the pending write answers its own set only.
	if _, _, err := s.LoadSet(setB, toks(1, 100), nil); !refusedFor(err, ReasonAdapters) {
		t.Fatalf("a queued write loaded under another set: %v", err)
	}
	s = flush(t, s)
	s.Close()

	s = open(t, cfg)
	if l := s.List(); len(l) != 1 || l[0].Set != setA {
		t.Fatalf("indexed %+v, want one file of set %s", l, setA)
	}
	if _, err := s.Load(toks(1, 100), nil); !refusedFor(err, ReasonAdapters) {
		t.Fatalf("the base model loaded a set's stream: %v", err)
	}
	s.Close()
	s = open(t, cfg)
	if _, _, err := s.LoadSet(setB, toks(1, 100), nil); !refusedFor(err, ReasonAdapters) {
		t.Fatalf("set B loaded set A's stream: %v", err)
	}
	s.Close()
	s = open(t, cfg)
	got, _, err := s.LoadSet(setA, toks(1, 100), nil)
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("set A after refusals elsewhere: %v", err)
	}
	s.Remove(toks(1, 100))
	if _, err := os.Stat(filepath.Join(s.Dir(), Name(toks(1, 100)))); !os.IsNotExist(err) || len(s.List()) != 0 {
		t.Fatalf("removed file: stat %v, list %d", err, len(s.List()))
	}
	s.Close()
}

// A base-model file whose set bytes were rewritten (checksum fixed, so
// the header is sound) is another set's file: not the base model's.
func TestAdapterSetBytesAreTheHeaders(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	path, _ := parked(t, dir, toks(1, 100), 1)
	mutate(t, path, func(b []byte) []byte {
		b[116] = 7
		hl := headerLen(100, 0)
		binary.LittleEndian.PutUint32(b[hl-4:], crc32c(b[:hl-4]))
		return b
	})
	s := open(t, cfg)
	defer s.Close()
	if l := s.List(); len(l) != 1 || l[0].Set.IsBase() {
		t.Fatalf("indexed %+v", l)
	}
	if _, err := s.Load(toks(1, 100), nil); !refusedFor(err, ReasonAdapters) {
		t.Fatalf("loaded as the base model's: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("another set's file removed: %v", err)
	}
}

func refusedFor(err error, want Reason) bool {
	r, ok := ReasonOf(err)
	return ok && r == want
}
