package park

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"superfluid/engine"
	"superfluid/flock"
)

// flatV1 leaves in dir itself the file an older build (format version 1,
// the flat layout) would have written for tokens under cfg, and returns
// its path.
func flatV1(t *testing.T, dir string, cfg Config, tokens []engine.Token, blob []byte) string {
	t.Helper()
	cfg.Dir = t.TempDir()
	s := open(t, cfg)
	if !s.Put(tokens, blob, nil) {
		t.Fatal("put dropped")
	}
	s.Close()
	if s.Stats().Parks.Load() != 1 {
		t.Fatalf("not parked: %d write errors", s.Stats().WriteErrors.Load())
	}
	b, err := os.ReadFile(filepath.Join(s.Dir(), Name(tokens)))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, Name(tokens))
	if err := os.WriteFile(path, toVersion1(b), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// An older build's flat directory: this identity's files move into its
// subdirectory and restore; files of another model, another KV type, the
// other V layout (same model and KV type: only the payload tells), a
// damaged one and a stranger's are left where they are, untouched.
func TestFlatLayoutMigratesThisIdentityAndLeavesTheRest(t *testing.T) {
	dir := t.TempDir()
	ours := testConfig(dir) // f16, transposed
	lossy := ours
	lossy.Lossy = true
	rows := ours
	rows.VLayout = VRows
	otherModel := ours
	otherModel.Identity = otherIdentity
	q8 := ours
	q8.KVType = "q8_0"

	// Ours: shuffled (and more than one shuffle block, with a cell list
	// longer than 64 KiB), lossy, and a plain q8_0 one under the q8_0
	// identity below.
	big, bigBlob := toks(1, 6000), stateBlob(6000, 2, 64, true, ggmlF16, 1)
	flatV1(t, dir, ours, big, bigBlob)
	small, smallBlob := toks(10000, 50), stateBlob(50, 2, 64, true, ggmlF16, 2)
	flatV1(t, dir, lossy, small, smallBlob)
	leftAlone := map[string][]byte{}
	keep := func(path string) {
		b, _ := os.ReadFile(path)
		leftAlone[path] = b
	}
	keep(flatV1(t, dir, rows, toks(20000, 50), stateBlob(50, 2, 64, false, ggmlF16, 3)))
	keep(flatV1(t, dir, otherModel, toks(30000, 50), stateBlob(50, 2, 64, true, ggmlF16, 4)))
	keep(flatV1(t, dir, q8, toks(40000, 6000), stateBlob(6000, 1, 68, true, 8, 5)))
	damaged := flatV1(t, dir, ours, toks(50000, 50), stateBlob(50, 2, 64, true, ggmlF16, 6))
	mutate(t, damaged, func(b []byte) []byte { b[20] ^= 1; return b })
	keep(damaged)
	stranger := filepath.Join(dir, "notes.txt")
	os.WriteFile(stranger, []byte("mine"), 0o644)
	keep(stranger)
	tmp := filepath.Join(dir, Name(toks(7, 7))+".tmp999")
	os.WriteFile(tmp, []byte("an older build's interrupted write"), 0o644)

	s := open(t, ours)
	if m, f := s.Stats().Migrated.Load(), s.Stats().Foreign.Load(); m != 2 || f != 4 {
		t.Fatalf("migrated %d, left %d; want 2 and 4", m, f)
	}
	if s.Stats().StaleTemps.Load() != 1 {
		t.Fatal("the older build's temporary file was not removed")
	}
	for path, want := range leftAlone {
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s was touched: %v", filepath.Base(path), err)
		}
	}
	if len(s.List()) != 2 {
		t.Fatalf("indexed %d", len(s.List()))
	}
	if got, err := s.Load(big, nil); err != nil || !bytes.Equal(got, bigBlob) {
		t.Fatalf("the migrated shuffled file: %v", err)
	}
	if got, err := s.Load(small, nil); err != nil || len(got) != len(smallBlob) || !checksumOK(got) {
		t.Fatalf("the migrated lossy file: %v", err)
	}
	for _, tk := range [][]engine.Token{big, small} {
		if _, err := os.Stat(filepath.Join(dir, Name(tk))); !os.IsNotExist(err) {
			t.Fatal("a migrated file is still in the flat layout")
		}
	}
	s.Close()

	// The other identities find theirs when they start.
	for _, cfg := range []Config{rows, otherModel, q8} {
		o := open(t, cfg)
		if o.Stats().Migrated.Load() != 1 || len(o.List()) != 1 {
			t.Fatalf("%s: migrated %d", Subdir(cfg.Identity, cfg.KVType, cfg.VLayout), o.Stats().Migrated.Load())
		}
		if _, err := o.Load(o.List()[0].Tokens, nil); err != nil {
			t.Fatalf("%s: %v", Subdir(cfg.Identity, cfg.KVType, cfg.VLayout), err)
		}
		o.Close()
	}
}

// While an older build serves from the flat layout (it holds the park
// directory's lock), nothing is moved; the next start does it.
func TestMigrationWaitsForAnOlderBuild(t *testing.T) {
	dir := t.TempDir()
	tk := toks(1, 50)
	path := flatV1(t, dir, testConfig(dir), tk, stateBlob(50, 2, 64, true, ggmlF16, 1))
	lock, err := flock.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, testConfig(dir))
	if s.Stats().Migrated.Load() != 0 || len(s.List()) != 0 {
		t.Fatal("migrated under an older build's lock")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	s.Close()
	lock.Close()
	s = open(t, testConfig(dir))
	if s.Stats().Migrated.Load() != 1 {
		t.Fatal("not migrated once the lock was free")
	}
	if _, err := s.Load(tk, nil); err != nil {
		t.Fatal(err)
	}
}
