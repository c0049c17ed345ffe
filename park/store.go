package park

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"superfluid/engine"
	"superfluid/flock"
)

// Config configures a Store. Validate it with Open.
type Config struct {
	// Dir is the park directory; created if missing.
	Dir string
	// Identity is the model's identity (engine.Descriptor.Identity) and
	// KVType its KV cache type: files written under any other are refused.
	Identity string
	KVType   string
	// Budget bounds the directory's park files in bytes, least recently
	// used out first; 0: unbounded.
	Budget int64
	// Lossy demotes f16 KV data to 8 bits (FlagLossy). An f16 cache only:
	// Open refuses it for another KV type, which has nothing to demote.
	Lossy bool
	// QueueLen and QueueBytes bound the writes waiting for the writer
	// (default 8 and 1 GiB): past either, Put drops the write.
	QueueLen   int
	QueueBytes int64
	// Logger gets the store's warnings (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("park: no directory")
	case c.Identity == "":
		return errors.New("park: no model identity")
	case len(c.KVType) > 8:
		return fmt.Errorf("park: KV type %q longer than 8 bytes", c.KVType)
	case c.Budget < 0 || c.QueueLen < 0 || c.QueueBytes < 0:
		return errors.New("park: negative budget or queue bound")
	case c.Lossy && c.KVType != "f16":
		return fmt.Errorf("park: lossy parking demotes an f16 KV cache to 8 bits; this cache is %s already, there is nothing to demote", c.KVType)
	}
	if c.QueueLen == 0 {
		c.QueueLen = 8
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = 1 << 30
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// modelID is the 32-byte identity stored in headers: the Identity's bytes
// when it is a hex sha256 (as gguf.ModelDigest gives), else its sha256.
func modelID(identity string) [32]byte {
	var id [32]byte
	if b, err := hex.DecodeString(identity); err == nil && len(b) == 32 {
		copy(id[:], b)
		return id
	}
	return sha256.Sum256([]byte(identity))
}

// Meta describes a park file on disk.
type Meta struct {
	Name    string
	Tokens  []engine.Token
	Bytes   int64
	ModTime time.Time // last written or restored: the sweep's order
	Lossy   bool
}

// job is a write waiting for (or in) the writer.
type job struct {
	name       string
	tokens     []engine.Token
	blob       []byte
	supersedes []string
}

// Store is a park directory. See the package comment for who may call what.
type Store struct {
	cfg   Config
	model [32]byte
	log   *slog.Logger
	lock  *os.File
	jobs  chan *job
	done  chan struct{}
	stats Stats

	warned sync.Once
	closed bool // owner only

	mu          sync.Mutex
	index       map[string]*Meta
	diskBytes   int64
	pending     map[string]*job
	queuedBytes int64
	gone        []string

	// The owner's decoder for Load; the writer's encoder and buffers.
	dec               payloadDecoder
	enc               payloadEncoder
	wDemoted, wHeader []byte
	// chunkHook, when set (tests), runs between the chunks of a file write.
	chunkHook func()
}

// Open indexes the directory (headers only), removes what earlier runs
// left half-written and what it must refuse, sweeps it to the budget and
// starts the writer.
func Open(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("park: %w", err)
	}
	// Two servers on one park directory would remove each other's
	// in-flight temporary files and sweep each other's files to their own
	// budgets.
	lock, err := flock.Dir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("park: %w", err)
	}
	s := &Store{
		cfg: cfg, model: modelID(cfg.Identity), log: cfg.Logger, lock: lock,
		jobs: make(chan *job, cfg.QueueLen), done: make(chan struct{}),
		index: map[string]*Meta{}, pending: map[string]*job{},
	}
	if err := s.scan(); err != nil {
		lock.Close()
		return nil, err
	}
	s.mu.Lock()
	s.sweepLocked("")
	s.mu.Unlock()
	s.gone = nil // nobody has seen the swept files
	go s.run()
	return s, nil
}

// Dir is the park directory.
func (s *Store) Dir() string { return s.cfg.Dir }

// Stats returns the live counters.
func (s *Store) Stats() *Stats { return &s.stats }

// Lossy reports whether new files are demoted to 8 bits.
func (s *Store) Lossy() bool { return s.cfg.Lossy }

// Budget is the directory's byte budget (0: unbounded).
func (s *Store) Budget() int64 { return s.cfg.Budget }

// List returns the park files on disk, most recently used first. Any
// goroutine. The token lists are shared: do not modify them.
func (s *Store) List() []Meta {
	s.mu.Lock()
	out := make([]Meta, 0, len(s.index))
	for _, m := range s.index {
		out = append(out, *m)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Meta) int { return b.ModTime.Compare(a.ModTime) })
	return out
}

// Put queues tokens' exported state for parking and reports whether it is
// (or already was) parked or queued; false when the write was dropped (a
// full queue, counted) or the store is closed. The store keeps blob until
// written: the caller must not modify it. Once written, the files named in
// supersedes (strict prefixes of tokens) are removed. Owner only.
func (s *Store) Put(tokens []engine.Token, blob []byte, supersedes []string) bool {
	return s.put(tokens, blob, supersedes, false)
}

// PutWait is Put waiting for room in the queue instead of dropping: for
// shutdown, when nothing waits on the caller. Owner only.
func (s *Store) PutWait(tokens []engine.Token, blob []byte, supersedes []string) bool {
	return s.put(tokens, blob, supersedes, true)
}

func (s *Store) put(tokens []engine.Token, blob []byte, supersedes []string, wait bool) bool {
	if s.closed || len(tokens) == 0 || len(blob) == 0 {
		return false
	}
	j := &job{name: Name(tokens), tokens: tokens, blob: blob, supersedes: supersedes}
	s.mu.Lock()
	if s.pending[j.name] != nil || s.index[j.name] != nil {
		s.mu.Unlock()
		return true
	}
	if !wait && s.queuedBytes+int64(len(blob)) > s.cfg.QueueBytes {
		s.mu.Unlock()
		s.stats.Dropped.Add(1)
		return false
	}
	if !wait {
		select {
		case s.jobs <- j:
		default:
			s.mu.Unlock()
			s.stats.Dropped.Add(1)
			return false
		}
	}
	s.pending[j.name] = j
	s.queuedBytes += int64(len(blob))
	s.mu.Unlock()
	if wait {
		s.jobs <- j // the writer takes jobs without s.mu held here
	}
	s.stats.Queued.Add(1)
	return true
}

// Load returns the exported state parked for tokens, verified and decoded,
// in dst (reused when large enough; a write still queued is copied there).
// A file that fails verification is removed and an error matching
// ErrRefused returned, its reason counted; a file that is gone returns an
// fs.ErrNotExist error. Owner only.
func (s *Store) Load(tokens []engine.Token, dst []byte) ([]byte, error) {
	name := Name(tokens)
	s.mu.Lock()
	if j := s.pending[name]; j != nil {
		s.mu.Unlock()
		return append(dst[:0], j.blob...), nil
	}
	s.mu.Unlock()
	start := time.Now()
	raw, h, size, err := s.readFile(name, tokens, dst)
	if cap(s.dec.scratch) > keepBuffers {
		s.dec.scratch = nil
	}
	if err != nil {
		if r, ok := ReasonOf(err); ok {
			s.stats.Refused[r].Add(1)
			s.log.Warn("park: refused a parked conversation; it will prefill cold", "file", name, "err", err)
		}
		s.forget(name, true)
		return nil, err
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(s.cfg.Dir, name), now, now) // the sweep's recency
	s.mu.Lock()
	if m := s.index[name]; m != nil {
		m.ModTime = now
	} else { // a file another process wrote since start-up
		s.addLocked(&Meta{Name: name, Tokens: h.Tokens, Bytes: size, ModTime: now, Lossy: h.Lossy()})
	}
	s.mu.Unlock()
	s.stats.Loads.Add(1)
	s.stats.LoadBytes.Add(size)
	s.stats.LoadRaw.Add(int64(len(raw)))
	s.stats.LoadNanos.Add(int64(time.Since(start)))
	return raw, nil
}

func (s *Store) readFile(name string, tokens []engine.Token, dst []byte) ([]byte, *Header, int64, error) {
	f, err := os.Open(filepath.Join(s.cfg.Dir, name))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("park: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("park: %w", err)
	}
	raw, h, err := s.decodeFile(f, st.Size(), name, tokens, dst)
	return raw, h, st.Size(), err
}

// decodeFile verifies a whole park file of size bytes and decodes its
// payload: the header's checks, the header against this store and the
// tokens asked for, then the payload's checksum and decoding.
func (s *Store) decodeFile(r io.ReaderAt, size int64, name string, tokens []engine.Token, dst []byte) ([]byte, *Header, error) {
	h, err := readHeader(io.NewSectionReader(r, 0, size), size)
	if err != nil {
		return nil, nil, err
	}
	if err := s.check(h, name); err != nil {
		return nil, nil, err
	}
	if !slices.Equal(h.Tokens, tokens) {
		return nil, nil, refuse(ReasonTokens, "the file covers other tokens than asked for")
	}
	raw, err := s.dec.decode(dst, h, io.NewSectionReader(r, h.Len(), int64(h.PayloadLen)))
	if err != nil {
		return nil, nil, err
	}
	return raw, h, nil
}

// check compares what the header says the file is with what this store
// serves.
func (s *Store) check(h *Header, name string) error {
	if h.Model != s.model {
		return refuse(ReasonModel, "written for model %x, this is %x", h.Model[:6], s.model[:6])
	}
	if h.KVType != s.cfg.KVType {
		return refuse(ReasonKVType, "written from a %s KV cache, this one is %s", h.KVType, s.cfg.KVType)
	}
	if hex.EncodeToString(h.TokenDigest[:])+".park" != name {
		return refuse(ReasonTokens, "the file's tokens do not match its name")
	}
	return nil
}

// Refuse removes a file whose state the engine would not take, counting
// the reason. Owner only.
func (s *Store) Refuse(tokens []engine.Token, r Reason, why error) {
	name := Name(tokens)
	s.stats.Refused[r].Add(1)
	s.log.Warn("park: refused a parked conversation; it will prefill cold", "file", name, "err", why)
	s.forget(name, true)
}

// forget drops name from the index (removing the file when remove) and
// reports it gone.
func (s *Store) forget(name string, remove bool) {
	if remove {
		if err := os.Remove(filepath.Join(s.cfg.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("park: removing a refused file", "file", name, "err", err)
		}
	}
	s.mu.Lock()
	s.dropLocked(name)
	s.gone = append(s.gone, name)
	s.mu.Unlock()
}

// Gone returns the names of files removed since the last call (swept,
// superseded, refused, or whose write failed or was dropped), so the
// owner can drop them from its index. Owner only.
func (s *Store) Gone() []string {
	s.mu.Lock()
	g := s.gone
	s.gone = nil
	s.mu.Unlock()
	return g
}

// Close waits for queued writes to finish and stops the writer. Owner
// only; the Store is unusable after.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.jobs)
	<-s.done
	return s.lock.Close() // releases the lock
}

func (s *Store) addLocked(m *Meta) {
	if old := s.index[m.Name]; old != nil {
		s.diskBytes -= old.Bytes
	}
	s.index[m.Name] = m
	s.diskBytes += m.Bytes
	s.publishLocked()
}

func (s *Store) dropLocked(name string) {
	if m := s.index[name]; m != nil {
		delete(s.index, name)
		s.diskBytes -= m.Bytes
		s.publishLocked()
	}
}

func (s *Store) publishLocked() {
	s.stats.Files.Store(int64(len(s.index)))
	s.stats.Bytes.Store(s.diskBytes)
}
