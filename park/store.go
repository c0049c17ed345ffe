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
	"strings"
	"sync"
	"time"

	"superfluid/engine"
	"superfluid/flock"
)

// Config configures a Store. Validate it with Open.
type Config struct {
	// Dir is the park directory; created if missing. The store parks in
	// its own subdirectory of it (Subdir), so that servers of several
	// models share one park directory without touching each other's files.
	Dir string
	// Identity is the model's identity (engine.Descriptor.Identity),
	// KVType its K cache type (and V's, unless VType names another) and
	// VLayout its V cache layout: together the identity of the state
	// parked, and the subdirectory's name. Files written under any other
	// are refused and left alone.
	Identity string
	KVType   string
	VType    string // "": KVType's
	VLayout  VLayout
	// Budget bounds this identity's park files in bytes, least recently
	// used out first; 0: unbounded. It is per identity, not for the whole
	// park directory: a budget shared by every model would let one model's
	// conversations sweep another's out, and sweeping a subdirectory
	// another running server indexes would pull files from under it.
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
	case !cacheTypeName(c.KVType) || c.VType != "" && !cacheTypeName(c.VType):
		return fmt.Errorf("park: KV types %q and %q: want names of 1 to 8 bytes", c.KVType, c.VType)
	case !c.VLayout.valid():
		return fmt.Errorf("park: V layout %s: want %s or %s", c.VLayout, VRows, VTransposed)
	case c.Budget < 0 || c.QueueLen < 0 || c.QueueBytes < 0:
		return errors.New("park: negative budget or queue bound")
	case c.Lossy && c.CacheTypes() != "f16":
		return fmt.Errorf("park: lossy parking demotes an f16 KV cache to 8 bits; this cache is %s already, there is nothing to demote", c.CacheTypes())
	}
	if c.VType == c.KVType {
		c.VType = ""
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

// cacheTypeName reports whether s can name a cache type in a header's 8
// bytes and a subdirectory's name.
func cacheTypeName(s string) bool {
	return s != "" && len(s) <= 8 && !strings.ContainsAny(s, "/\\.-\x00")
}

// CacheTypes names the K and V cache types: one name when they are the
// same, else "K-V" (e.g. "q8_0-f16").
func (c *Config) CacheTypes() string {
	if c.VType == "" || c.VType == c.KVType {
		return c.KVType
	}
	return c.KVType + "-" + c.VType
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
	// Checkpoints are the positions of the checkpoints the file holds.
	Checkpoints []int
	// Set is the LoRA adapter set the stream was computed under (zero:
	// the base model).
	Set engine.AdapterSetID
}

// job is a write waiting for (or in) the writer.
type job struct {
	name       string
	tokens     []engine.Token
	blob       []byte
	ckpts      []engine.Checkpoint
	supersedes []string
	set        engine.AdapterSetID
	// dropped: Remove asked for the file while the write was queued; the
	// writer removes what it wrote (under mu).
	dropped bool
}

// bytes is what the job holds in the queue.
func (j *job) bytes() int64 {
	n := int64(len(j.blob))
	for _, cp := range j.ckpts {
		n += int64(len(cp.Blob))
	}
	return n
}

// Store is a park directory. See the package comment for who may call what.
type Store struct {
	cfg   Config
	dir   string // the identity's subdirectory of cfg.Dir
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
	// refused names files that failed verification or that the engine
	// would not import: never read again by this store (a damaged file
	// whose removal failed, or a good file the engine refused, would
	// otherwise be read, checksummed and decompressed again at every
	// match). A new write under the name clears it.
	refused map[string]Reason

	// The owner's decoder for Load; the writer's encoder and buffers.
	dec               payloadDecoder
	enc               payloadEncoder
	wDemoted, wHeader []byte
	// chunkHook, when set (tests), runs between the chunks of a file write.
	chunkHook func()
}

// Open moves this identity's files of the flat layout earlier builds
// wrote into its subdirectory (migrate.go), indexes the subdirectory
// (headers only), removes what earlier runs left half-written and what is
// damaged, sweeps it to the budget and starts the writer.
func Open(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.Dir, Subdir(cfg.Identity, cfg.CacheTypes(), cfg.VLayout))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("park: %w", err)
	}
	// Two servers on one identity's subdirectory would remove each
	// other's in-flight temporary files and sweep each other's files to
	// their own budgets. Servers of other identities may run beside it.
	lock, err := flock.Dir(dir)
	if err != nil {
		return nil, fmt.Errorf("park: %w", err)
	}
	s := &Store{
		cfg: cfg, dir: dir, model: modelID(cfg.Identity), log: cfg.Logger, lock: lock,
		jobs: make(chan *job, cfg.QueueLen), done: make(chan struct{}),
		index: map[string]*Meta{}, pending: map[string]*job{}, refused: map[string]Reason{},
	}
	s.migrate()
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

// Dir is the directory this store parks in: its identity's subdirectory
// of the park directory.
func (s *Store) Dir() string { return s.dir }

// Stats returns the live counters.
func (s *Store) Stats() *Stats { return &s.stats }

// Lossy reports whether new files are demoted to 8 bits.
func (s *Store) Lossy() bool { return s.cfg.Lossy }

// Budget is the identity's byte budget (0: unbounded).
func (s *Store) Budget() int64 { return s.cfg.Budget }

// List returns the park files on disk that may be restored (not those
// the engine would not take), most recently used first. Any goroutine.
// The token lists are shared: do not modify them.
func (s *Store) List() []Meta {
	s.mu.Lock()
	out := make([]Meta, 0, len(s.index))
	for name, m := range s.index {
		if _, bad := s.refused[name]; !bad {
			out = append(out, *m)
		}
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
	return s.PutWith(tokens, blob, nil, supersedes, false)
}

// PutWait is Put waiting for room in the queue instead of dropping: for
// shutdown, when nothing waits on the caller. Owner only.
func (s *Store) PutWait(tokens []engine.Token, blob []byte, supersedes []string) bool {
	return s.PutWith(tokens, blob, nil, supersedes, true)
}

// PutWith is Put (PutWait when wait) parking the stream's checkpoints
// beside its state: those at positions in [1, len(tokens)], ascending,
// at most MaxCheckpoints (the last kept). Owner only.
func (s *Store) PutWith(tokens []engine.Token, blob []byte, ckpts []engine.Checkpoint, supersedes []string, wait bool) bool {
	return s.put(engine.AdapterSetID{}, tokens, blob, usableCheckpoints(ckpts, len(tokens)), supersedes, wait)
}

// PutSet is PutWith for a stream computed under the LoRA adapter set set:
// the file names it, and only LoadSet of that set restores it. Owner only.
func (s *Store) PutSet(set engine.AdapterSetID, tokens []engine.Token, blob []byte, ckpts []engine.Checkpoint, supersedes []string, wait bool) bool {
	return s.put(set, tokens, blob, usableCheckpoints(ckpts, len(tokens)), supersedes, wait)
}

func usableCheckpoints(ckpts []engine.Checkpoint, n int) []engine.Checkpoint {
	var out []engine.Checkpoint
	for _, cp := range ckpts {
		if cp.Pos > 0 && cp.Pos <= n && len(cp.Blob) > 0 && (len(out) == 0 || cp.Pos > out[len(out)-1].Pos) {
			out = append(out, cp)
		}
	}
	if len(out) > MaxCheckpoints {
		out = out[len(out)-MaxCheckpoints:]
	}
	return out
}

func (s *Store) put(set engine.AdapterSetID, tokens []engine.Token, blob []byte, ckpts []engine.Checkpoint, supersedes []string, wait bool) bool {
	if s.closed || len(tokens) == 0 || len(blob) == 0 {
		return false
	}
	j := &job{name: Name(tokens), tokens: tokens, blob: blob, ckpts: ckpts, supersedes: supersedes, set: set}
	s.mu.Lock()
	if p := s.pending[j.name]; p != nil {
		// One write per name in the queue; another set's (a namespace
		// two sets claimed, sched/lora.go) keeps it.
		s.mu.Unlock()
		return p.set == set && !p.dropped
	}
	if _, bad := s.refused[j.name]; s.index[j.name] != nil && !bad && s.index[j.name].Set == set {
		s.mu.Unlock()
		return true
	}
	if !wait && s.queuedBytes+j.bytes() > s.cfg.QueueBytes {
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
	s.queuedBytes += j.bytes()
	s.mu.Unlock()
	if wait {
		s.jobs <- j // the writer takes jobs without s.mu held here
	}
	s.stats.Queued.Add(1)
	return true
}

// Load returns the exported state parked for tokens, verified and decoded,
// in dst (reused when large enough; a write still queued is copied there).
// A file that fails verification is removed when damaged (left alone when
// another build or identity wrote it) and an error matching ErrRefused
// returned, its reason counted once: the name is remembered, and a later
// Load of it returns the refusal without reading anything. A file that is
// gone returns an fs.ErrNotExist error. Owner only.
func (s *Store) Load(tokens []engine.Token, dst []byte) ([]byte, error) {
	raw, _, err := s.LoadWith(tokens, dst)
	return raw, err
}

// LoadWith is Load returning the stream's parked checkpoints too
// (ascending; each blob its own). Owner only.
func (s *Store) LoadWith(tokens []engine.Token, dst []byte) ([]byte, []engine.Checkpoint, error) {
	return s.LoadSet(engine.AdapterSetID{}, tokens, dst)
}

// LoadSet is LoadWith for a stream computed under the LoRA adapter set
// set: a file of another set is refused (ReasonAdapters) and left alone.
// Owner only.
func (s *Store) LoadSet(set engine.AdapterSetID, tokens []engine.Token, dst []byte) ([]byte, []engine.Checkpoint, error) {
	name := Name(tokens)
	s.mu.Lock()
	if j := s.pending[name]; j != nil && !j.dropped {
		s.mu.Unlock()
		if j.set != set {
			return nil, nil, refuseForeign(ReasonAdapters, "queued for LoRA adapter set %s, asked for %s", j.set, set)
		}
		return append(dst[:0], j.blob...), j.ckpts, nil
	}
	r, bad := s.refused[name]
	s.mu.Unlock()
	if bad {
		return nil, nil, refuse(r, "refused earlier in this run; not read again")
	}
	start := time.Now()
	raw, ckpts, h, size, err := s.readFile(set, name, tokens, dst)
	if cap(s.dec.scratch) > keepBuffers {
		s.dec.scratch = nil
	}
	if err != nil {
		if r, ok := ReasonOf(err); ok {
			s.refuseName(name, r, err, !foreign(err))
		} else {
			s.forget(name, false)
		}
		return nil, nil, err
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(s.dir, name), now, now) // the sweep's recency
	s.mu.Lock()
	if m := s.index[name]; m != nil {
		m.ModTime = now
	} else { // a file another process wrote since start-up
		s.addLocked(&Meta{Name: name, Tokens: h.Tokens, Bytes: size, ModTime: now, Lossy: h.Lossy(), Checkpoints: h.checkpointPositions(), Set: h.Set})
	}
	s.mu.Unlock()
	s.stats.Loads.Add(1)
	s.stats.LoadBytes.Add(size)
	s.stats.LoadRaw.Add(int64(len(raw)))
	s.stats.LoadNanos.Add(int64(time.Since(start)))
	return raw, ckpts, nil
}

func (s *Store) readFile(set engine.AdapterSetID, name string, tokens []engine.Token, dst []byte) ([]byte, []engine.Checkpoint, *Header, int64, error) {
	s.stats.Reads.Add(1)
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("park: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("park: %w", err)
	}
	raw, h, err := s.decodeFile(f, st.Size(), set, name, tokens, dst)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	ckpts, err := s.decodeCheckpoints(f, h)
	return raw, ckpts, h, st.Size(), err
}

// decodeCheckpoints verifies and decodes the checkpoints after the main
// payload; damage to any refuses the file, as damage to the payload does.
func (s *Store) decodeCheckpoints(r io.ReaderAt, h *Header) ([]engine.Checkpoint, error) {
	off := h.Len() + int64(h.PayloadLen)
	var out []engine.Checkpoint
	for _, sp := range h.Checkpoints {
		ph := Header{Flags: sp.Flags, RawLen: sp.RawLen, PayloadLen: sp.PayloadLen, PayloadCRC: sp.PayloadCRC}
		raw, err := s.dec.decode(nil, &ph, io.NewSectionReader(r, off, int64(sp.PayloadLen)))
		if err != nil {
			return nil, err
		}
		out = append(out, engine.Checkpoint{Pos: int(sp.Pos), Blob: raw})
		off += int64(sp.PayloadLen)
	}
	return out, nil
}

// decodeFile verifies a whole park file of size bytes and decodes its
// payload: the header's checks, the header against this store and the
// tokens asked for, then the payload's checksum and decoding.
func (s *Store) decodeFile(r io.ReaderAt, size int64, set engine.AdapterSetID, name string, tokens []engine.Token, dst []byte) ([]byte, *Header, error) {
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
	if h.Set != set {
		// Sound, and another set's to restore: left on disk.
		return nil, nil, refuseForeign(ReasonAdapters, "computed under LoRA adapter set %s, asked for %s", h.Set, set)
	}
	raw, err := s.dec.decode(dst, h, io.NewSectionReader(r, h.Len(), int64(h.PayloadLen)))
	if err != nil {
		return nil, nil, err
	}
	// The header's layout is what the writer read from the state; a
	// state that says otherwise was labelled wrongly and would not import.
	if l, err := stateVLayout(raw); err == nil && l != h.VLayout {
		return nil, nil, refuse(ReasonVLayout, "the header says V layout %s, the state %s", h.VLayout, l)
	}
	return raw, h, nil
}

// check compares what the header says the file is with what this store
// serves.
func (s *Store) check(h *Header, name string) error {
	if h.Version != formatVersion && h.Version != spacelessVersion {
		return refuseForeign(ReasonFormat, "format version %d, from before the V layout was recorded; this build reads %d and %d", h.Version, formatVersion, spacelessVersion)
	}
	if h.Model != s.model {
		return refuseForeign(ReasonModel, "written for model %x, this is %x", h.Model[:6], s.model[:6])
	}
	if h.CacheTypes() != s.cfg.CacheTypes() {
		return refuseForeign(ReasonKVType, "written from a %s KV cache, this one is %s", h.CacheTypes(), s.cfg.CacheTypes())
	}
	if h.VLayout != s.cfg.VLayout {
		return refuseForeign(ReasonVLayout, "written from a cache with V layout %s, this one is %s", h.VLayout, s.cfg.VLayout)
	}
	if hex.EncodeToString(h.TokenDigest[:])+".park" != name {
		return refuse(ReasonTokens, "the file's tokens do not match its name")
	}
	return nil
}

// Refuse counts a file whose state is wrong for what it claims (the
// engine restored another token count than its header says), removes it
// and remembers it. Owner only.
func (s *Store) Refuse(tokens []engine.Token, r Reason, why error) {
	s.refuseName(Name(tokens), r, why, true)
}

// Busy reports whether a write of about n bytes would be dropped now: the
// queue is full. The owner asks before exporting a stream, so a backlogged
// writer does not make it copy state out of the KV pool only to drop it.
// The writer may free room meanwhile, so Put still decides. Owner only.
func (s *Store) Busy(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true
	}
	if len(s.jobs) < cap(s.jobs) && s.queuedBytes+n <= s.cfg.QueueBytes {
		return false
	}
	s.stats.Dropped.Add(1)
	return true
}

// Holds reports whether name is parked or queued to be, and not refused:
// a name Gone reported may have been parked again since. Owner only.
func (s *Store) Holds(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[name] != nil {
		return true
	}
	_, bad := s.refused[name]
	return s.index[name] != nil && !bad
}

// Unusable remembers a file the engine would not take: this store does
// not read it again, but leaves it on disk, since the engine may have
// been short of KV cells rather than unable to take it, and the next run
// may restore it. Not counted as a refusal (the caller counts its failed
// restores); a new write under the name replaces it. Owner only.
func (s *Store) Unusable(tokens []engine.Token, why error) {
	name := Name(tokens)
	s.log.Warn("park: the engine would not import a parked conversation; not trying it again in this run", "file", name, "err", why)
	s.mu.Lock()
	s.refused[name] = ReasonDecode
	s.gone = append(s.gone, name)
	s.mu.Unlock()
}

// refuseName counts a refusal, removes the file if asked (it is damaged)
// and remembers its name.
func (s *Store) refuseName(name string, r Reason, why error, remove bool) {
	s.stats.Refused[r].Add(1)
	s.log.Warn("park: refused a parked conversation; it will prefill cold", "file", name, "err", why)
	s.forget(name, remove)
	s.mu.Lock()
	s.refused[name] = r
	s.mu.Unlock()
}

// Remove removes the file parked for tokens, or the write queued for it:
// its stream is no longer wanted (the prefix cache gave its adapter set's
// namespace to another set). Owner only.
func (s *Store) Remove(tokens []engine.Token) {
	name := Name(tokens)
	s.mu.Lock()
	if j := s.pending[name]; j != nil {
		j.dropped = true
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.forget(name, true)
}

// forget drops name from the index (removing the file when remove) and
// reports it gone.
func (s *Store) forget(name string, remove bool) {
	if remove {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
