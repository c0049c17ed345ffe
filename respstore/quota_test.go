package respstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func sizedRecord(id string, n int) Record {
	return Record{ID: id, Response: json.RawMessage(`"` + strings.Repeat("x", n) + `"`), Input: json.RawMessage(`[]`)}
}

func fileCount(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Past MaxBytes the oldest records go, their files removed, and the newest
// stay; a record over MaxRecordBytes is refused and nothing is evicted for
// it; a store opened again counts what is on disk and applies a lowered
// bound at once.
func TestDiskStoreIsBounded(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Now()}
	s, err := Open(dir, Options{Now: c.now, MaxBytes: 10_000, MaxRecordBytes: 4_000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		c.t = c.t.Add(time.Second)
		if err := s.Put(sizedRecord(fmt.Sprintf("resp_%d", i), 2_000)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Bytes() > 10_000 || fileCount(t, dir) != 4 {
		t.Fatalf("%d bytes in %d files, bound 10000", s.Bytes(), fileCount(t, dir))
	}
	for i := range 8 {
		_, err := s.Get(fmt.Sprintf("resp_%d", i))
		if gone := i < 4; gone != errors.Is(err, ErrNotFound) {
			t.Errorf("resp_%d: %v (the oldest four go)", i, err)
		}
	}
	var tl *RecordTooLargeError
	if err := s.Put(sizedRecord("resp_big", 5_000)); !errors.As(err, &tl) || tl.Limit != 4_000 {
		t.Fatalf("a record over the per-record bound: %v", err)
	}
	if fileCount(t, dir) != 4 {
		t.Fatal("a refused record evicted others or reached the disk")
	}
	if err := s.Delete("resp_7"); err != nil {
		t.Fatal(err)
	}
	before := s.Bytes()

	s2, err := Open(dir, Options{Now: c.now, MaxBytes: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Bytes() != before {
		t.Fatalf("reopened: %d bytes, want %d", s2.Bytes(), before)
	}
	s3, err := Open(dir, Options{Now: c.now, MaxBytes: 4_500})
	if err != nil {
		t.Fatal(err)
	}
	if s3.Bytes() > 4_500 || fileCount(t, dir) != 2 {
		t.Fatalf("a lowered bound: %d bytes in %d files", s3.Bytes(), fileCount(t, dir))
	}
	if _, err := s3.Get("resp_6"); err != nil {
		t.Fatalf("the newest record is gone: %v", err)
	}
}

// Concurrent writes never leave more on disk than the bound.
func TestDiskStoreBoundUnderConcurrentPuts(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{MaxBytes: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				if err := s.Put(sizedRecord(fmt.Sprintf("resp_%d_%d", w, i), 1_000)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var onDisk int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		info, _ := e.Info()
		onDisk += info.Size()
	}
	if onDisk > 20_000 || onDisk != s.Bytes() {
		t.Fatalf("%d bytes on disk, %d counted; bound 20000", onDisk, s.Bytes())
	}
}

// A record bound above the total is held to the total: one record never
// takes the store past it.
func TestRecordBoundIsHeldToTheTotal(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{MaxBytes: 1_000, MaxRecordBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	var tl *RecordTooLargeError
	if err := s.Put(sizedRecord("resp_big", 2_000)); !errors.As(err, &tl) || tl.Limit != 1_000 {
		t.Fatalf("a record over the total: %v", err)
	}
	if s.MaxRecordBytes() != 1_000 || fileCount(t, dir) != 0 {
		t.Fatalf("record bound %d, %d files", s.MaxRecordBytes(), fileCount(t, dir))
	}
}
