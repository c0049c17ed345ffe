// Package respstore keeps the responses of OpenAI's Responses API
// (POST /v1/responses with store: true) so that a later request can name
// one as its previous_response_id, and GET and DELETE /v1/responses/{id}
// can find it. Each response is one JSON file under the store's directory,
// written atomically (a crash leaves the old file or the new one, never a
// part); it expires a TTL after it was made (OpenAI keeps them 30 days)
// and is removed then. A store without a directory keeps a bounded number
// of responses in memory, so that a server with --data-dir off still
// chains responses while it runs.
//
// The store does not read what it keeps: a Record's Response and Input are
// the HTTP layer's JSON.
package respstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultTTL is how long a response is kept: OpenAI's 30 days.
const DefaultTTL = 30 * 24 * time.Hour

// memoryCap and memoryBytes bound a store without a directory: the oldest
// responses go when one more would exceed either (each record holds its
// whole conversation, so a long agent loop's records are large).
const (
	memoryCap   = 1024
	memoryBytes = 64 << 20
)

// sweepEvery is how often a Put also removes the expired files.
const sweepEvery = time.Hour

// ErrNotFound is the answer for an id that is not stored (never was,
// deleted, expired).
var ErrNotFound = errors.New("respstore: no such response")

// Record is one stored response.
type Record struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// Response is the response object as the API returned it.
	Response json.RawMessage `json:"response"`
	// Input are the input items the response answered, those of its own
	// previous_response_id included, so that a response chained to this
	// one needs to read only this record.
	Input json.RawMessage `json:"input"`
	// Chain, when set, names the conversation in the HTTP layer's chain
	// store that holds the response's input and output items, those of
	// the responses before it first; Input is then empty.
	Chain string `json:"chain,omitempty"`
}

// Store holds responses; its methods are safe for concurrent use.
type Store struct {
	dir string // "" keeps them in memory
	ttl time.Duration
	now func() time.Time

	maxBytes  int64 // ≤ 0: unbounded
	maxRecord int64 // ≤ 0: unbounded

	mu        sync.Mutex
	mem       map[string]Record
	order     []string // mem's ids, oldest first
	memSize   int      // the bytes of mem's records
	idx       *index   // the records on disk (a directory store)
	lastSweep time.Time
}

// Options tune a store; zero values take the defaults noted.
type Options struct {
	TTL time.Duration    // default DefaultTTL
	Now func() time.Time // the clock (tests move it); default time.Now
	// MaxBytes bounds the records on disk together: the oldest go first
	// to make room (default DefaultMaxBytes, <0 unbounded). A memory
	// store keeps its own smaller bounds.
	MaxBytes int64
	// MaxRecordBytes bounds one record; a larger one is refused
	// (RecordTooLargeError). Default DefaultMaxRecordBytes, <0 unbounded.
	MaxRecordBytes int64
}

// Open opens the store in dir (created if need be), removing what has
// expired and what a crash left half-written. dir "" is a memory store.
func Open(dir string, o Options) (*Store, error) {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if dir != "" && o.MaxBytes > 0 && (o.MaxRecordBytes <= 0 || o.MaxRecordBytes > o.MaxBytes) {
		o.MaxRecordBytes = o.MaxBytes // one record may not outgrow them all
	}
	s := &Store{dir: dir, ttl: o.TTL, now: o.Now, mem: map[string]Record{}, maxBytes: o.MaxBytes, maxRecord: o.MaxRecordBytes,
		idx: &index{byID: map[string]*diskEntry{}}}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("respstore: %w", err)
	}
	s.sweep()
	idx, err := indexDir(dir)
	if err != nil {
		return nil, err
	}
	s.idx = idx
	if s.maxBytes > 0 { // the bound may have been lowered since the records were written
		s.removeFiles(s.idx.evict(0, s.maxBytes))
	}
	return s, nil
}

// Dir is the store's directory, "" for a memory store.
func (s *Store) Dir() string { return s.dir }

// ValidID says whether id can name a stored response: the ids the API
// makes are "resp_" and hex; anything else (a path, say) is never stored.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > 100 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Put stores r, replacing a record of the same id.
func (s *Store) Put(r Record) error {
	if !ValidID(r.ID) {
		return fmt.Errorf("respstore: invalid id %q", r.ID)
	}
	if r.Created.IsZero() {
		r.Created = s.now()
	}
	if s.dir == "" {
		if size := int64(recordSize(r)); s.maxRecord > 0 && size > s.maxRecord {
			return &RecordTooLargeError{ID: r.ID, Size: size, Limit: s.maxRecord}
		}
		s.putMemory(r)
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("respstore: encoding %s: %w", r.ID, err)
	}
	if size := int64(len(b)); s.maxRecord > 0 && size > s.maxRecord { // the bytes the disk will hold
		return &RecordTooLargeError{ID: r.ID, Size: size, Limit: s.maxRecord}
	}
	// Room is made, and the record counted, before it is written: two
	// writes at once cannot both pass the bound.
	s.mu.Lock()
	s.idx.remove(r.ID)
	var evicted []string
	if s.maxBytes > 0 {
		evicted = s.idx.evict(int64(len(b)), s.maxBytes)
	}
	e := s.idx.add(r.ID, int64(len(b)), r.Created)
	s.mu.Unlock()
	s.removeFiles(evicted)
	err = writeAtomic(s.path(r.ID), b)
	s.mu.Lock()
	kept := s.idx.holds(e)
	if err != nil && kept {
		s.idx.remove(r.ID)
	}
	orphan := err == nil && !kept && s.idx.byID[r.ID] == nil
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if orphan {
		// Evicted while it was written (others made room after it) or
		// deleted: the file it became goes too, or the disk would hold
		// more than the index counts.
		os.Remove(s.path(r.ID))
	}
	s.mu.Lock()
	due := s.now().Sub(s.lastSweep) >= sweepEvery
	s.mu.Unlock()
	if due {
		s.sweep()
	}
	return nil
}

func (s *Store) putMemory(r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.mem[r.ID]; ok {
		s.memSize -= recordSize(old)
	} else {
		s.order = append(s.order, r.ID)
	}
	s.mem[r.ID] = r
	s.memSize += recordSize(r)
	for len(s.order) > memoryCap || s.memSize > memoryBytes && len(s.order) > 1 {
		s.memSize -= recordSize(s.mem[s.order[0]])
		delete(s.mem, s.order[0])
		s.order = s.order[1:]
	}
}

// Get returns the record of id, ErrNotFound when there is none or it has
// expired.
func (s *Store) Get(id string) (Record, error) {
	if !ValidID(id) {
		return Record{}, ErrNotFound
	}
	var r Record
	if s.dir == "" {
		s.mu.Lock()
		var ok bool
		r, ok = s.mem[id]
		s.mu.Unlock()
		if !ok {
			return Record{}, ErrNotFound
		}
	} else {
		b, err := os.ReadFile(s.path(id))
		if errors.Is(err, os.ErrNotExist) {
			return Record{}, ErrNotFound
		}
		if err != nil {
			return Record{}, fmt.Errorf("respstore: reading %s: %w", id, err)
		}
		if err := json.Unmarshal(b, &r); err != nil || r.ID != id {
			return Record{}, fmt.Errorf("respstore: %s is not a stored response (%v)", s.path(id), err)
		}
	}
	if s.expired(r.Created) {
		s.Delete(id)
		return Record{}, ErrNotFound
	}
	return r, nil
}

// Delete removes id's record; ErrNotFound when there is none.
func (s *Store) Delete(id string) error {
	if !ValidID(id) {
		return ErrNotFound
	}
	if s.dir == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		r, ok := s.mem[id]
		if !ok {
			return ErrNotFound
		}
		s.memSize -= recordSize(r)
		delete(s.mem, id)
		if i := indexOf(s.order, id); i >= 0 {
			s.order = append(s.order[:i], s.order[i+1:]...)
		}
		return nil
	}
	s.mu.Lock()
	s.idx.remove(id)
	s.mu.Unlock()
	err := os.Remove(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("respstore: deleting %s: %w", id, err)
	}
	return nil
}

func (s *Store) expired(created time.Time) bool { return s.now().Sub(created) >= s.ttl }

// sweep removes the expired records and the temporary files of writes a
// crash interrupted. A record's file is written once, so its modification
// time is when it was made: the sweep reads no file.
func (s *Store) sweep() {
	s.mu.Lock()
	s.lastSweep = s.now()
	s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		slog.Warn("responses store: sweep", "dir", s.dir, "err", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		info, err := e.Info()
		if err != nil || e.IsDir() {
			continue
		}
		stale := strings.HasSuffix(name, tmpSuffix) && s.now().Sub(info.ModTime()) > time.Minute
		if stale || strings.HasSuffix(name, ".json") && s.expired(info.ModTime()) {
			s.mu.Lock()
			s.idx.remove(strings.TrimSuffix(name, ".json"))
			s.mu.Unlock()
			if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				slog.Warn("responses store: removing an expired response", "file", name, "err", err)
			}
		}
	}
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+".json") }

func recordSize(r Record) int { return len(r.Response) + len(r.Input) }

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
