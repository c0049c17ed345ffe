package respstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestStoreRoundTripDeleteAndExpiry(t *testing.T) {
	for _, dir := range []string{t.TempDir(), ""} {
		c := &clock{t: time.Now()}
		s, err := Open(dir, Options{TTL: time.Hour, Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		rec := Record{ID: "resp_1", Response: json.RawMessage(`{"id":"resp_1"}`), Input: json.RawMessage(`[]`)}
		if err := s.Put(rec); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get("resp_1")
		if err != nil || string(got.Response) != `{"id":"resp_1"}` {
			t.Fatalf("dir %q: get = %+v, %v", dir, got, err)
		}
		if err := s.Delete("resp_1"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := s.Get("resp_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if err := s.Delete("resp_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		s.Put(Record{ID: "resp_2", Response: json.RawMessage(`{}`), Input: json.RawMessage(`[]`)})
		c.t = c.t.Add(2 * time.Hour)
		if _, err := s.Get("resp_2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("dir %q: expired record: %v", dir, err)
		}
	}
}

func TestOpenSweepsExpiredAndTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Put(Record{ID: "resp_old", Response: json.RawMessage(`{}`), Input: json.RawMessage(`[]`)})
	tmp := filepath.Join(dir, ".resp_x.json.1"+tmpSuffix)
	os.WriteFile(tmp, []byte("half"), 0o644)
	later := time.Now().Add(DefaultTTL + time.Hour)
	if _, err := Open(dir, Options{Now: func() time.Time { return later }}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("left after the sweep: %v", entries)
	}
}

func TestInvalidIDsNeverReachTheDisk(t *testing.T) {
	s, _ := Open(t.TempDir(), Options{})
	for _, id := range []string{"", "../x", "a/b", "resp_1.json"} {
		if _, err := s.Get(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v", id, err)
		}
		if err := s.Put(Record{ID: id}); err == nil {
			t.Errorf("Put(%q) accepted", id)
		}
	}
}

func TestMemoryStoreIsBounded(t *testing.T) {
	s, _ := Open("", Options{})
	for i := range memoryCap + 5 {
		s.Put(Record{ID: fmt.Sprintf("resp_%d", i)})
	}
	if len(s.mem) != memoryCap || len(s.order) != memoryCap {
		t.Fatalf("memory store holds %d (%d ids), cap %d", len(s.mem), len(s.order), memoryCap)
	}
}

func TestMemoryStoreIsBoundedInBytes(t *testing.T) {
	s, _ := Open("", Options{MaxRecordBytes: -1}) // records of 16 MiB
	big := json.RawMessage(`"` + strings.Repeat("x", memoryBytes/4) + `"`)
	for i := range 6 {
		s.Put(Record{ID: fmt.Sprintf("resp_%d", i), Response: big})
	}
	if s.memSize > memoryBytes || len(s.mem) != 3 {
		t.Fatalf("memory store holds %d records, %d bytes", len(s.mem), s.memSize)
	}
	if _, err := s.Get("resp_5"); err != nil {
		t.Fatalf("the newest record is gone: %v", err)
	}
	s.Delete("resp_5")
	if s.memSize != 2*len(big) {
		t.Fatalf("after delete: %d bytes", s.memSize)
	}
}
