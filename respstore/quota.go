package respstore

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The store's bounds on disk. Every record holds its whole conversation
// (so that a chained request reads one file), so an agent's loop writes a
// record as long as its context on every turn, kept 30 days: without a
// bound, a busy server fills its disk with copies of the same chains.
//
// Past the total, the oldest records go first: stored responses are a
// cache of conversations a client may continue, the newest are the ones
// continued, and continuing a chain needs only its newest record. Refusing
// new records instead would break every new conversation to keep the
// oldest, most likely abandoned ones. A record over the per-record bound
// is refused (not stored), since evicting everything else for one record
// would not make it fit; the HTTP layer refuses a request whose
// conversation already exceeds it before it runs.
const (
	DefaultMaxBytes       = 1 << 30
	DefaultMaxRecordBytes = 16 << 20
)

// RecordTooLargeError is Put's answer for a record over the per-record
// bound.
type RecordTooLargeError struct {
	ID          string
	Size, Limit int64
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("respstore: response %s is %d bytes, over the %d a stored response may hold", e.ID, e.Size, e.Limit)
}

// diskEntry is one record file the index knows: its size and when it was
// made, so that eviction reads no file.
type diskEntry struct {
	id      string
	size    int64
	created time.Time
	gone    bool // deleted or replaced: skipped (and compacted away) by the order
}

// index is the records on disk, oldest first. Guarded by Store.mu.
type index struct {
	byID  map[string]*diskEntry
	order []*diskEntry // by creation; may hold gone entries
	gone  int          // gone entries in order
	bytes int64        // the sizes of byID's entries
}

func (x *index) add(id string, size int64, created time.Time) *diskEntry {
	x.remove(id)
	e := &diskEntry{id: id, size: size, created: created}
	x.byID[id] = e
	x.bytes += size
	if n := len(x.order); n > 0 && created.Before(x.order[n-1].created) {
		i, _ := slices.BinarySearchFunc(x.order, created, func(e *diskEntry, t time.Time) int { return e.created.Compare(t) })
		x.order = slices.Insert(x.order, i, e)
		return e
	}
	x.order = append(x.order, e)
	return e
}

// holds reports whether e is still the index's entry for its id: not
// evicted, deleted or replaced meanwhile.
func (x *index) holds(e *diskEntry) bool { return x.byID[e.id] == e }

func (x *index) remove(id string) {
	e := x.byID[id]
	if e == nil {
		return
	}
	delete(x.byID, id)
	x.bytes -= e.size
	e.gone = true
	x.gone++
	if x.gone > len(x.order)/2 {
		x.order = slices.DeleteFunc(x.order, func(e *diskEntry) bool { return e.gone })
		x.gone = 0
	}
}

// evict takes the oldest records out of the index until need more bytes
// fit under limit, and returns their ids (the caller removes the files).
func (x *index) evict(need, limit int64) []string {
	var out []string
	for x.bytes+need > limit && len(x.byID) > 0 {
		e := x.order[0]
		if !e.gone {
			out = append(out, e.id)
			delete(x.byID, e.id)
			x.bytes -= e.size
		} else {
			x.gone--
		}
		x.order[0] = nil
		x.order = x.order[1:]
	}
	return out
}

// indexDir lists dir's record files: their sizes, and their modification
// times as when they were made (a record's file is written once).
func indexDir(dir string) (*index, error) {
	x := &index{byID: map[string]*diskEntry{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return x, fmt.Errorf("respstore: %w", err)
	}
	for _, de := range ents {
		name := de.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || de.IsDir() || !ValidID(id) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		e := &diskEntry{id: id, size: info.Size(), created: info.ModTime()}
		x.byID[id] = e
		x.order = append(x.order, e)
		x.bytes += e.size
	}
	slices.SortFunc(x.order, func(a, b *diskEntry) int { return cmp.Or(a.created.Compare(b.created), strings.Compare(a.id, b.id)) })
	return x, nil
}

// removeFiles removes evicted records' files (without the store's lock).
func (s *Store) removeFiles(ids []string) {
	for _, id := range ids {
		if err := os.Remove(filepath.Join(s.dir, id+".json")); err != nil && !os.IsNotExist(err) {
			slog.Warn("responses store: removing a response to make room", "id", id, "err", err)
		}
	}
}

// Bytes is what the stored records hold together.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		return int64(s.memSize)
	}
	return s.idx.bytes
}

// MaxRecordBytes is the per-record bound (≤ 0: none).
func (s *Store) MaxRecordBytes() int64 { return s.maxRecord }
