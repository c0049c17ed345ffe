package batches

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"superfluid/batch"
	"superfluid/flock"
)

// Config tunes a store. Zero values take the defaults noted.
type Config struct {
	// Parallel is how many of a batch's requests are in flight at once
	// (default 1). The app passes twice the server's lanes: enough that a
	// lane freed by one request finds the next one already queued.
	Parallel int
	// Retries and Backoff are the Runner's: how often a request that got
	// no answer or a 502/503/504 is sent again, and the first wait.
	Retries int
	Backoff time.Duration
	// RetryPause is the first pause before a batch sends the requests that
	// got no answer again (default 10s; it doubles each round), and the
	// pause after its results could not be written (default 30s).
	RetryPause time.Duration
	DiskPause  time.Duration
	// Now is the clock (tests move it to expire batches); default time.Now.
	Now func() time.Time
	// MaxFilesBytes bounds the bytes of the files together, uploads and
	// batch outputs: an upload past it is refused (QuotaError). Batch
	// outputs count but are never refused — they are the answers to
	// requests already run. 0: DefaultMaxFilesBytes; <0: unbounded.
	MaxFilesBytes int64
}

// Store holds the files and batches of one directory. Its methods are safe
// for concurrent use.
type Store struct {
	dir  string
	cfg  Config
	lock *os.File

	mu      sync.Mutex
	files   map[string]*File
	batches map[string]*Batch
	// filesBytes is what files hold plus the uploads under way (their
	// reservations); maxFiles bounds it, ≤ 0 not.
	filesBytes int64
	maxFiles   int64
	lastID     int64 // the time part of the last id made: ids sort by creation
	closed     bool
	// The worker: started by Start, stopped by Close.
	doer      batch.Doer
	stop      context.CancelFunc
	done      chan struct{}
	wake      chan struct{}
	running   string                  // the batch the worker runs
	cancelRun context.CancelCauseFunc // ends that run; nil between runs
}

// Open opens (creating it if need be) the store in dir and indexes it:
// batches that were running are queued again, batches that were being
// cancelled end cancelled, objects that cannot be read are logged and
// left alone. The worker does not run until Start.
func Open(dir string, cfg Config) (*Store, error) {
	if cfg.Parallel <= 0 {
		cfg.Parallel = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RetryPause <= 0 {
		cfg.RetryPause = 10 * time.Second
	}
	if cfg.DiskPause <= 0 {
		cfg.DiskPause = 30 * time.Second
	}
	if cfg.MaxFilesBytes == 0 {
		cfg.MaxFilesBytes = DefaultMaxFilesBytes
	}
	for _, d := range []string{filepath.Join(dir, "files"), filepath.Join(dir, "batches")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("batches: %w", err)
		}
	}
	// Two servers on one directory would both run its batches.
	lock, err := flock.Dir(dir)
	if err != nil {
		return nil, fmt.Errorf("batches: %w", err)
	}
	s := &Store{dir: dir, cfg: cfg, lock: lock, files: map[string]*File{}, batches: map[string]*Batch{}, wake: make(chan struct{}, 1),
		maxFiles: cfg.MaxFilesBytes}
	if err := s.indexFiles(); err != nil {
		s.unlock()
		return nil, err
	}
	if err := s.indexBatches(); err != nil {
		s.unlock()
		return nil, err
	}
	s.recover()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Start runs the worker, which sends every batch's requests through d.
// The app calls it once the model is loaded. A second call, or one after
// Close, does nothing.
func (s *Store) Start(d batch.Doer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.doer, s.stop, s.done = d, cancel, make(chan struct{})
	go s.work(ctx)
}

// Close stops the worker promptly: the running batch's requests in flight
// are abandoned (not recorded, so they run again after a restart) and the
// batch stays in_progress on disk. Reads still work after Close; changes
// answer ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	return s.unlock()
}

func (s *Store) unlock() error {
	if s.lock == nil {
		return nil
	}
	return s.lock.Close() // closing the descriptor releases the lock
}

func (s *Store) now() int64 { return s.cfg.Now().Unix() }

// newID returns prefix + 16 hex digits of the creation time in
// nanoseconds (strictly increasing within the store, so ids sort in
// creation order) + 8 random hex digits. Call with s.mu held.
func (s *Store) newID(prefix string) string {
	t := s.cfg.Now().UnixNano()
	if t <= s.lastID {
		t = s.lastID + 1
	}
	s.lastID = t
	var r [4]byte
	rand.Read(r[:])
	return fmt.Sprintf("%s%016x%s", prefix, t, hex.EncodeToString(r[:]))
}

// noteID keeps newID ahead of an id read from disk (a clock set back, or
// a test's clock, must not sort new objects before old ones).
func (s *Store) noteID(prefix, id string) {
	rest := strings.TrimPrefix(id, prefix)
	if len(rest) < 16 {
		return
	}
	if t, err := strconv.ParseInt(rest[:16], 16, 64); err == nil && t > s.lastID {
		s.lastID = t
	}
}

// validID refuses ids that could name a path outside the store.
func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (s *Store) filePath(id string) string  { return filepath.Join(s.dir, "files", id) }
func (s *Store) batchPath(id string) string { return filepath.Join(s.dir, "batches", id+".json") }
func (s *Store) resultPath(id string) string {
	return filepath.Join(s.dir, "batches", id+".results.jsonl")
}

// indexFiles reads files/: an object whose content is missing is dropped
// (its metadata removed); content without an object (an upload cut short
// between the two renames) and temporary files are removed.
func (s *Store) indexFiles() error {
	dir := filepath.Join(s.dir, "files")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("batches: %w", err)
	}
	content, unreadable := map[string]bool{}, map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			os.Remove(filepath.Join(dir, name))
		case strings.HasSuffix(name, ".json"):
			id := strings.TrimSuffix(name, ".json")
			var f File
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err == nil {
				err = json.Unmarshal(b, &f)
			}
			if err != nil || f.ID != id || !validID(id) {
				slog.Warn("batches: a file object cannot be read; ignored", "path", filepath.Join(dir, name), "err", err)
				unreadable[id] = true // its content is left alone too
				continue
			}
			s.files[id] = &f
			s.noteID("file-", id)
		case e.Type().IsRegular():
			content[name] = true
		}
	}
	for id := range s.files {
		if !content[id] {
			slog.Warn("batches: a file's content is missing; dropping the file", "id", id)
			os.Remove(filepath.Join(dir, id+".json"))
			delete(s.files, id)
		}
	}
	for name := range content {
		if _, ok := s.files[name]; !ok && !unreadable[name] {
			os.Remove(filepath.Join(dir, name))
		}
	}
	for _, f := range s.files {
		s.filesBytes += f.Bytes
	}
	return nil
}

// indexBatches reads batches/*.json; one that cannot be read is logged
// and left on disk for a person to look at.
func (s *Store) indexBatches() error {
	dir := filepath.Join(s.dir, "batches")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("batches: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		id := strings.TrimSuffix(name, ".json")
		var b Batch
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			err = json.Unmarshal(raw, &b)
		}
		if err == nil && (b.ExpiresAt == nil || b.Status == "") {
			err = errors.New("no status or expires_at")
		}
		if err != nil || b.ID != id || !validID(id) {
			slog.Warn("batches: a batch object cannot be read; ignored", "path", filepath.Join(dir, name), "err", err)
			continue
		}
		s.batches[id] = &b
		s.noteID("batch_", id)
	}
	return nil
}

// recover brings the batches a stop interrupted back on their way:
// validating ones are validated again, finalizing ones run again (their
// failed-for-retry records get another try, then they finalize), cancelling
// ones end cancelled, and finished ones lose a results file their end did
// not get to remove.
func (s *Store) recover() {
	for _, id := range s.sortedBatchIDs() {
		b := s.batches[id]
		switch b.Status {
		case StatusValidating:
			s.validate(id)
		case StatusFinalizing:
			s.mu.Lock()
			b.Status = StatusInProgress
			s.persistLocked(b)
			s.mu.Unlock()
		case StatusCancelling:
			s.finish(id, StatusCancelled, nil)
		default:
			if b.Status.Finished() {
				os.Remove(s.resultPath(id))
			}
		}
	}
}

// persistLocked writes b's object. A failure is logged: the object in
// memory stays right, and the next change writes it again. Call with s.mu
// held, so that writes of one batch land in order.
func (s *Store) persistLocked(b *Batch) {
	if err := writeJSON(s.batchPath(b.ID), b); err != nil {
		slog.Error("batches: saving a batch", "id", b.ID, "err", err)
	}
}
