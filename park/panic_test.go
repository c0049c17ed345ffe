package park

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"superfluid/panics"
)

// A panic writing one file fails that file alone: it is counted (as a
// write error, and under park_writer), no temporary file stays behind,
// and the writer goes on with the next write.
func TestWriterPanicFailsOnlyThatFile(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s := open(t, cfg)
	armed := true
	s.chunkHook = func() { // runs on the writer's goroutine only
		if armed {
			armed = false
			panic("fault writing this file")
		}
	}
	before := panics.Count(panics.ParkWriter)
	blob := stateBlob(50, 1, 64, true, ggmlF16, 1)
	if !s.Put(toks(1, 50), blob, nil) || !s.Put(toks(2, 50), blob, nil) {
		t.Fatal("a put was dropped")
	}
	if err := s.Close(); err != nil { // waits for both writes
		t.Fatal(err)
	}
	st := s.Stats()
	if st.WriteErrors.Load() != 1 || st.Parks.Load() != 1 {
		t.Fatalf("write errors %d, parks %d; want 1 and 1", st.WriteErrors.Load(), st.Parks.Load())
	}
	if got := panics.Count(panics.ParkWriter) - before; got != 1 {
		t.Errorf("%d panics counted, want 1", got)
	}
	ents, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("a temporary file stayed: %s", e.Name())
		}
	}
	s2 := open(t, cfg)
	if _, err := s2.Load(toks(1, 50), nil); err == nil {
		t.Error("the file whose write panicked can be loaded")
	}
	if got, err := s2.Load(toks(2, 50), nil); err != nil || !bytes.Equal(got, blob) {
		t.Errorf("the next file: %v", err)
	}
}
