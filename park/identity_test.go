package park

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const otherIdentity = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Two models share one park directory, both stores open at once: each
// parks in its own subdirectory, neither's start-up, writes or budget
// sweep touches the other's files, and each restores its own after a
// restart.
func TestIdentitiesShareAParkDirectory(t *testing.T) {
	dir := t.TempDir()
	cfgA := testConfig(dir)
	cfgB := testConfig(dir)
	cfgB.Identity, cfgB.VLayout = otherIdentity, VRows
	blobA := stateBlob(100, 2, 64, true, ggmlF16, 1)
	blobB := stateBlob(100, 2, 64, false, ggmlF16, 2)

	a := open(t, cfgA)
	a.Put(toks(1, 100), blobA, nil)
	a = flush(t, a)
	b := open(t, cfgB) // beside a: the lock is per subdirectory
	b.Put(toks(1, 100), blobB, nil)
	b = flush(t, b)
	if a.Dir() == b.Dir() || filepath.Dir(a.Dir()) != dir || filepath.Base(b.Dir()) != "0123456789ab-f16-vrows" {
		t.Fatalf("subdirectories %s and %s", a.Dir(), b.Dir())
	}
	// B's budget fits one file: its sweep removes only B's oldest.
	st, _ := os.Stat(filepath.Join(b.Dir(), Name(toks(1, 100))))
	b.Close()
	cfgB.Budget = st.Size() + st.Size()/2
	b = open(t, cfgB)
	b.Put(toks(500, 100), blobB, nil)
	b = flush(t, b)
	if b.Stats().Swept.Load() != 0 || len(b.List()) != 1 || b.List()[0].Tokens[0] != 500 {
		t.Fatalf("B's sweep: swept %d, kept %+v", b.Stats().Swept.Load(), b.List())
	}
	for name, s := range map[string]*Store{"A": a, "B": b} {
		for r := range NumReasons {
			if n := s.Stats().Refused[r].Load(); n != 0 {
				t.Fatalf("%s refused %d files (%s)", name, n, r)
			}
		}
	}
	a.Close()
	b.Close()

	a = open(t, cfgA)
	if got, err := a.Load(toks(1, 100), nil); err != nil || !bytes.Equal(got, blobA) {
		t.Fatalf("A after B ran: %v", err)
	}
	b = open(t, cfgB)
	if got, err := b.Load(toks(500, 100), nil); err != nil || !bytes.Equal(got, blobB) {
		t.Fatalf("B after A ran: %v", err)
	}
}

func TestOneServerPerIdentity(t *testing.T) {
	dir := t.TempDir()
	open(t, testConfig(dir))
	if s, err := Open(testConfig(dir)); err == nil {
		s.Close()
		t.Fatal("a second store opened on the same identity's subdirectory")
	}
	other := testConfig(dir)
	other.KVType = "q8_0"
	open(t, other) // another identity: its own subdirectory and lock
}

func TestStateVLayout(t *testing.T) {
	for _, vt := range []bool{false, true} {
		want := VRows
		if vt {
			want = VTransposed
		}
		blob := stateBlob(40, 2, 32, vt, ggmlF16, 1)
		if l, err := stateVLayout(blob); err != nil || l != want {
			t.Fatalf("v_trans %v: %s, %v", vt, l, err)
		}
		// The layout sits after the cell list: 4 header words, then 12
		// bytes a cell.
		if _, err := stateVLayout(blob[:engineHeaderLen+8+40*12]); !errors.Is(err, errShort) {
			t.Fatalf("a prefix without the layout: %v", err)
		}
		if l, err := stateVLayout(blob[:engineHeaderLen+8+40*12+4]); err != nil || l != want {
			t.Fatalf("the shortest prefix with the layout: %s, %v", l, err)
		}
	}
	if _, err := stateVLayout([]byte("FK not engine state at all, but long enough to have a header of sixty-four bytes.")); err == nil || errors.Is(err, errShort) {
		t.Fatalf("foreign bytes: %v", err)
	}
}

// The writer reads the layout from the state: a state of the other
// layout is never parked under this store's.
func TestWriterRefusesAStateOfTheOtherLayout(t *testing.T) {
	s := open(t, testConfig(t.TempDir())) // transposed
	s.Put(toks(1, 50), stateBlob(50, 1, 64, false, ggmlF16, 1), nil)
	s.Close()
	if s.Stats().WriteErrors.Load() != 1 || s.Stats().Parks.Load() != 0 {
		t.Fatalf("write errors %d, parks %d", s.Stats().WriteErrors.Load(), s.Stats().Parks.Load())
	}
	if ents, _ := os.ReadDir(s.Dir()); len(ents) != 1 { // LOCK
		t.Fatalf("%d entries in the subdirectory", len(ents))
	}
}

// A header that claims the store's layout over a state of the other is
// refused at restore, by the layout, and removed.
func TestMislabelledLayoutIsRefusedAtRestore(t *testing.T) {
	dir := t.TempDir()
	rows := testConfig(dir)
	rows.VLayout = VRows
	s := open(t, rows)
	tk := toks(1, 60)
	s.Put(tk, stateBlob(60, 1, 64, false, ggmlF16, 1), nil)
	s.Close()
	trans := open(t, testConfig(dir))
	path := filepath.Join(trans.Dir(), Name(tk))
	b, _ := os.ReadFile(filepath.Join(s.Dir(), Name(tk)))
	b[9] = byte(VTransposed)
	os.WriteFile(path, resum(b), 0o644)
	trans.Close()
	trans = open(t, testConfig(dir))
	if len(trans.List()) != 1 {
		t.Fatal("the header alone should pass")
	}
	if _, err := trans.Load(tk, nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("load: %v", err)
	}
	if trans.Stats().Refused[ReasonVLayout].Load() != 1 {
		t.Fatal("not refused by the layout")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("the mislabelled file stayed")
	}
}

// A refused file is read once: a later Load of its name answers from
// memory, without opening it, and the refusal is counted once.
func TestRefusedFileIsReadOnce(t *testing.T) {
	dir := t.TempDir()
	tk := toks(1, 80)
	path, blob := parked(t, dir, tk, 3)
	mutate(t, path, func(b []byte) []byte { b[len(b)-7] ^= 4; return b })
	damaged, _ := os.ReadFile(path)
	s := open(t, testConfig(dir))
	for i := range 3 {
		if _, err := s.Load(tk, nil); !errors.Is(err, ErrRefused) {
			t.Fatalf("load %d: %v", i, err)
		}
		os.WriteFile(path, damaged, 0o644) // a removal that did not take
	}
	if n := s.Stats().Reads.Load(); n != 1 {
		t.Fatalf("read %d times", n)
	}
	if n := s.Stats().Refused[ReasonPayload].Load(); n != 1 {
		t.Fatalf("counted %d times", n)
	}
	// A fresh state under the name replaces it.
	if !s.Put(tk, blob, nil) {
		t.Fatal("put dropped")
	}
	s = flush(t, s)
	if got, err := s.Load(tk, nil); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("after a fresh write: %v", err)
	}
}

// A file the engine would not take is not read again in this run, stays
// on disk, and restores in the next.
func TestUnusableFileIsKeptForTheNextRun(t *testing.T) {
	dir := t.TempDir()
	tk := toks(1, 80)
	path, blob := parked(t, dir, tk, 3)
	s := open(t, testConfig(dir))
	if _, err := s.Load(tk, nil); err != nil {
		t.Fatal(err)
	}
	s.Unusable(tk, errors.New("no room"))
	if s.Holds(Name(tk)) || len(s.List()) != 0 {
		t.Fatal("an unusable file is still offered")
	}
	if _, err := s.Load(tk, nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("second load: %v", err)
	}
	if s.Stats().Reads.Load() != 1 {
		t.Fatalf("read %d times", s.Stats().Reads.Load())
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file went: %v", err)
	}
	s.Close()
	s = open(t, testConfig(dir))
	if got, err := s.Load(tk, nil); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("next run: %v", err)
	}
}
