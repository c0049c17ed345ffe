package flock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// flock(2) locks belong to open file descriptions: a second open of the
// same file in this process conflicts like another process would.
func TestSecondLockIsRefusedUntilTheFirstCloses(t *testing.T) {
	dir := t.TempDir()
	first, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(dir); !errors.Is(err, ErrHeld) {
		t.Fatalf("second lock: %v, want ErrHeld", err)
	}
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Try(f); !errors.Is(err, ErrHeld) {
		t.Fatalf("Try: %v, want ErrHeld", err)
	}
	first.Close()
	again, err := Dir(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Close()
	if _, err := Dir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("locked a directory that does not exist")
	}
}
