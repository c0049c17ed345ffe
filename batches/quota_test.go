package batches

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Uploads are refused past MaxFilesBytes with a QuotaError, leaving
// nothing on disk; a delete makes room; the bound counts the files found
// at Open; concurrent uploads cannot pass it together.
func TestFilesQuota(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Config{MaxFilesBytes: 100})
	first := upload(t, s, strings.Repeat("a", 60))
	var qe *QuotaError
	if _, err := s.CreateFile("two.jsonl", PurposeBatch, strings.NewReader(strings.Repeat("b", 50))); !errors.As(err, &qe) || qe.Limit != 100 {
		t.Fatalf("an upload past the bound: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "files"))
	if len(ents) != 2 { // the first file's content and object
		t.Fatalf("files on disk after a refused upload: %d", len(ents))
	}
	if s.FilesBytes() != 60 {
		t.Fatalf("FilesBytes %d, want 60", s.FilesBytes())
	}
	if err := s.DeleteFile(first.ID); err != nil {
		t.Fatal(err)
	}
	upload(t, s, strings.Repeat("c", 90))
	s.Close()

	s2 := openStore(t, dir, Config{MaxFilesBytes: 100})
	if s2.FilesBytes() != 90 {
		t.Fatalf("FilesBytes after reopening %d, want 90", s2.FilesBytes())
	}
	if _, err := s2.CreateFile("x", PurposeBatch, strings.NewReader(strings.Repeat("d", 11))); !errors.As(err, &qe) {
		t.Fatalf("the bound after reopening: %v", err)
	}
	upload(t, s2, strings.Repeat("e", 10))

	// Eight uploads of 30 bytes racing for a bound of 100: three pass.
	s3 := openStore(t, t.TempDir(), Config{MaxFilesBytes: 100})
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 8 {
		wg.Go(func() {
			if _, err := s3.CreateFile("r", PurposeBatch, strings.NewReader(strings.Repeat("r", 30))); err == nil {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if passed != 3 || s3.FilesBytes() != int64(30*passed) {
		t.Fatalf("%d uploads passed, %d bytes stored; the bound is 100", passed, s3.FilesBytes())
	}
}
