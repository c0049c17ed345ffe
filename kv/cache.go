package kv

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"superfluid/engine"
	"superfluid/park"
)

// Config sizes a Cache. Validate it with New.
type Config struct {
	// Seqs is the number of engine sequences, [0, Seqs); the cache hands
	// them to lanes and keeps the rest as entries.
	Seqs int
	// MaxResidentTokens bounds the distinct tokens resident entries hold in
	// the KV pool (a prefix several entries share counts once); 0: bounded
	// only by the sequence table and the engine's KV-full reports. A
	// sliding-window model's entries are not held to it (residentBudget).
	MaxResidentTokens int
	// MaxWindowResidentTokens is a sliding-window model's bound in place of
	// MaxResidentTokens, over which the conversation being served stays
	// (enforceBudget, admitted); 0: its entries stay until the engine
	// reports a full pool.
	MaxWindowResidentTokens int
	// HostBytes is the host-memory tier's budget for exported entries; 0
	// disables the tier.
	HostBytes int64
	// MinSharedTokens is the shortest prefix that eviction keeps because two
	// requests shared it (default 32).
	MinSharedTokens int
	// MinHostTokens is the shortest entry worth exporting to host memory
	// (default 64): below it, prefilling again is as cheap as importing.
	MinHostTokens int

	// Park is the disk tier; nil disables it. The cache owns the store
	// from New on (its index becomes entries; Close closes it). Entries
	// leaving host memory are parked, and entries leaving the pool when
	// host memory is off or too small for them.
	Park *park.Store
	// ParkEager parks every stream a lane publishes, as it retires, not
	// only what leaves memory: a crash then loses nothing.
	ParkEager bool
	// ParkIdle parks and evicts entries unused for this long (0: never).
	// The cache checks on its own calls (Acquire, Release, Relieve): a
	// server no one calls has no one who needs the room.
	ParkIdle time.Duration
	// Watermarks are the marks memory pressure sheds host memory and the
	// pool to (pressure.go; default 85% high, 70% low).
	Watermarks Watermarks
	// MinParkTokens is the shortest stream worth parking (default
	// MinHostTokens).
	MinParkTokens int
	// Now is the clock ParkIdle is measured on (default time.Now).
	Now func() time.Time
	// BeforeRestoreRead, when set, runs on a restore's reader goroutine
	// before it reads the parked stream (of tokens tokens): a test holds a
	// restore open with it to see the other lanes step meanwhile.
	BeforeRestoreRead func(tokens int)
}

func (c *Config) validate() error {
	if c.Seqs < 1 {
		return fmt.Errorf("kv: %d sequences: need at least one", c.Seqs)
	}
	if c.MaxResidentTokens < 0 || c.MaxWindowResidentTokens < 0 || c.HostBytes < 0 || c.MinSharedTokens < 0 || c.MinHostTokens < 0 || c.MinParkTokens < 0 || c.ParkIdle < 0 {
		return errors.New("kv: negative budget")
	}
	if err := c.Watermarks.validate(); err != nil {
		return err
	}
	if c.Park == nil && (c.ParkEager || c.ParkIdle > 0) {
		return errors.New("kv: eager or idle parking without a park store")
	}
	if c.MinSharedTokens == 0 {
		c.MinSharedTokens = 32
	}
	if c.MinHostTokens == 0 {
		c.MinHostTokens = 64
	}
	if c.MinParkTokens == 0 {
		c.MinParkTokens = c.MinHostTokens
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// ErrNoSequence means every sequence carries a lane: nothing can be evicted
// to make room for another.
var ErrNoSequence = errors.New("kv: every sequence is in use by a lane")

// entry is a resident cached stream: seq holds the tokens of node's path.
type entry struct {
	seq     int32
	node    *node
	used    uint64    // the cache clock when last matched or published
	touched time.Time // the wall clock then, for idle parking
	// ckpts are the stream's checkpoints of partial state (partial.go),
	// ascending; nil for a model without partial state.
	ckpts []engine.Checkpoint
}

// Cache is the prefix cache over an engine's sequences. It implements
// sched.Cache. One goroutine owns it.
type Cache struct {
	eng     engine.Engine
	cfg     Config
	tree    radix
	free    []int32
	leased  map[int32]bool
	entries map[int32]*entry
	host    hostTier
	clock   uint64
	stats   Stats

	park       *park.Store
	parked     map[string]*parkEntry // by file name
	restoreBuf []byte
	view       viewCache
	pins       pinTable
	spaces     func(first engine.Token) (engine.AdapterSetID, bool) // nil: every stream is the base model's

	// Restores read on reader goroutines (restore.go): in flight by
	// sequence; loads take turns on loadMu; Close waits for readers.
	restores map[int32]*restore
	loadMu   sync.Mutex
	readers  sync.WaitGroup

	// shedding: the machine is short of memory (ShedMemory): nothing is
	// exported to host memory, and the pool is held to its low mark.
	shedding bool

	// inherit holds, per leased sequence, the checkpoints of the entry its
	// seed came from, up to the seed (partial.go).
	inherit map[int32][]engine.Checkpoint

	// lastTier is the tier the last acquisition's prefix came from ("" when
	// cold), lastParked whether the last Release parked its stream: what a
	// trace says of them (sched.TierReporter).
	lastTier   string
	lastParked bool
	// seededFrom is, per leased sequence, the resident entry its seed
	// was copied from when the prompt kept most of it: its conversation's,
	// which stays in the pool while the lane runs and as it publishes
	// (admitted, enforceBudget).
	seededFrom map[int32]*entry
}

// LastAcquireTier is where the last Acquire (or AcquireRestoring) found
// its prefix: "resident", "host", "parked", or "" for a cold start.
func (c *Cache) LastAcquireTier() string { return c.lastTier }

// LastReleaseParked reports whether the last Release's stream is parked
// on disk or queued to be (eager parking).
func (c *Cache) LastReleaseParked() bool { return c.lastParked }

// New returns a cache managing sequences [0, cfg.Seqs) of eng, all of which
// must be empty and free of lanes.
func New(eng engine.Engine, cfg Config) (*Cache, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cache{eng: eng, cfg: cfg, leased: map[int32]bool{}, entries: map[int32]*entry{}, parked: map[string]*parkEntry{}, restores: map[int32]*restore{}, inherit: map[int32][]engine.Checkpoint{}, seededFrom: map[int32]*entry{}}
	c.host.budget = cfg.HostBytes
	for s := cfg.Seqs - 1; s >= 0; s-- {
		c.free = append(c.free, int32(s))
	}
	if cfg.Park != nil {
		c.park = cfg.Park
		c.host.leaving = c.parkHost
		c.indexParked()
	}
	c.publishGauges()
	return c, nil
}

// Acquire returns a free sequence holding the longest cached prefix of
// tokens (at most len(tokens)-1 of them) and that prefix's length.
func (c *Cache) Acquire(tokens []engine.Token) (int32, int, error) {
	c.lastTier = ""
	c.clock++
	c.tidy()
	seq, err := c.takeSeq()
	if err != nil {
		return -1, 0, err
	}
	c.leased[seq] = true
	limit := len(tokens) - 1
	cached := 0
	if limit > 0 {
		cached = c.seed(seq, tokens, limit, true)
	}
	if !c.sound(seq, cached) {
		cached = 0
	}
	c.countAcquire(tokens, cached)
	c.admitted(seq)
	return seq, cached, nil
}

// countAcquire counts an acquisition that seeded cached tokens of tokens.
func (c *Cache) countAcquire(tokens []engine.Token, cached int) {
	if cached == 0 {
		c.stats.Misses.Add(1)
		return
	}
	c.stats.Hits.Add(1)
	c.stats.WarmTokens.Add(int64(cached))
	c.countHits(tokens[:cached])
}

// seed fills seq from the deepest tier entry sharing a prefix with tokens:
// the longest match wins, resident before host memory before disk on a
// tie (cheapest first). A host or parked entry that fails is dropped (or,
// parked but refused by the engine, skipped) and the next best tried.
//
// An entry that cannot be cut there and has no checkpoint before it
// (partial.go) is passed over for the next best, a shorter prefix.
func (c *Cache) seed(seq int32, tokens []engine.Token, limit int, fromPark bool) int {
	tried := map[any]bool{}
	for range 6 {
		n, matched := c.tree.match(tokens)
		cd := c.candidates(n, matched, tried)
		res, host, pk := min(cd.resDepth, limit), min(cd.hostDepth, limit), min(cd.parkDepth, limit)
		switch {
		case fromPark && cd.park != nil && pk > max(res, host):
			c.roomToLoad(nil)
			if got := c.seedFromPark(seq, cd.park, pk); got > 0 {
				c.lastTier = "parked"
				return got
			}
			tried[cd.park] = true
		case cd.host != nil && host > res:
			c.roomToLoad(cd.host)
			if got := c.seedFromHost(seq, cd.host, host); got > 0 {
				c.lastTier = "host"
				return got
			}
			tried[cd.host] = true
		case cd.res != nil && res > 0:
			if got := c.seedFromResident(seq, cd.res, res); got > 0 {
				c.lastTier = "resident"
				return got
			}
			tried[cd.res] = true
		default:
			return 0
		}
	}
	return 0
}

// seedFromResident makes seq hold the first depth tokens of e's stream
// (shared cells), or the tokens up to e's last checkpoint before depth
// when a cut at depth is not valid; 0 when neither can be had.
func (c *Cache) seedFromResident(seq int32, e *entry, depth int) int {
	if depth < e.node.depth && !c.cutValid(e.seq, depth) {
		cp, ok := latestCheckpoint(e.ckpts, depth)
		if !ok {
			c.stats.CutRefusals.Add(1)
			return 0
		}
		if err := c.eng.CopyPrefix(e.seq, seq, cp.Pos); err != nil {
			slog.Warn("prefix cache: copy failed, admitting cold", "err", err)
			c.eng.Free(seq)
			return 0
		}
		depth = c.resumeFromCheckpoint(seq, cp.Pos, e.ckpts)
		if depth == 0 {
			return 0
		}
	} else if err := c.eng.CopyPrefix(e.seq, seq, depth); err != nil {
		slog.Warn("prefix cache: copy failed, admitting cold", "err", err)
		return 0
	}
	e.used, e.touched = c.clock, c.cfg.Now()
	c.inherit[seq] = checkpointsUpTo(e.ckpts, depth)
	if depth < e.node.depth && c.handsOver(seq, e, depth) {
		return depth
	}
	if 2*depth >= e.node.depth {
		// A prompt that keeps most of e continues its conversation (a
		// turn, an edit): e is spared with it (enforceBudget). One that
		// shares only a template's opening or a system prompt with e
		// starts another conversation, and must not hold e's whole
		// length in the pool.
		c.seededFrom[seq] = e
	}
	return depth
}

// roomToLoad holds idle entries to their budget before a stream is
// loaded from host memory (h, kept there meanwhile) or disk, rather than
// after (admitted): the loaded cells then take the cells they free, low in
// the pool, instead of landing above them, where every later step of the
// lane attends over both (a second turn after an edit attended over 4,055
// cells for its own 2,050: synth qwen3 small, issue 22). A tail's
// resident prefix stays, cut back to it (readyBase): the tail is put back
// onto it.
func (c *Cache) roomToLoad(h *hostEntry) {
	c.host.held = map[*hostEntry]bool{}
	defer func() { c.host.held = nil }()
	var base *entry
	if h != nil {
		c.host.held[h] = true
		if h.base > 0 {
			if base = c.readyBase(h); base == nil {
				c.holdChain(h)
			}
		}
	}
	c.enforceBudget(base)
}

// handsOver moves e's stream out of the pool but for its first depth
// tokens, which seq was just seeded with, when e is a full-attention
// model's and host memory takes it; true when it did. A prompt that
// leaves a conversation there (an edited message, a regenerated answer)
// continues it in seq, and e's cells past depth would sit below seq's new
// ones, widening every step's attention: an edit 15% from the end of a
// 2,000-token conversation attended over ~2,380 cells where llama-server,
// which cuts its slot back to the prompt, attends over ~2,060 (synth
// qwen3 and qwen3moe small, issue 22). What is cut goes to host memory
// first (evict: only the cut part where the engine can take a stream
// apart, tail.go), so that the stream's own next turn is an import away; e
// keeps the shared prefix, whose cells seq holds too, and seq's new tokens
// take the freed cells (llama.cpp moves its head back as a sequence's
// cells are removed).
// Sliding-window and hybrid streams stay whole: moved out they keep only
// their last window or their last state, and resident they serve any cut
// their cells still cover. Without room in host memory e stays whole too:
// its next turn stays warm at the cost of the wider steps.
func (c *Cache) handsOver(seq int32, e *entry, depth int) bool {
	if c.eng.Descriptor().Partial != engine.PartialNone || !c.exportable(e) || c.pinned()[e.node] > depth {
		return false
	}
	moved := e.node.depth
	if c.cutsTail(e, depth) {
		moved -= depth
	}
	if !c.host.fits(int(int64(moved) * c.eng.Descriptor().KVBytesPerToken)) {
		return false
	}
	c.evict(e, c.nodeAt(e.node, depth))
	if c.entries[e.seq] == e {
		// e is the prefix seq shares now, spared while seq runs
		// (enforceBudget) and absorbed when seq publishes (Release).
		c.seededFrom[seq] = e
	}
	return true
}

// candidates are the best entry of each tier sharing a prefix with a
// prompt, and how many tokens each shares.
type candidates struct {
	res       *entry
	resDepth  int
	host      *hostEntry
	hostDepth int
	park      *parkEntry
	parkDepth int
}

// candidates finds the best resident, host and parked entries sharing a
// prefix with the walked tokens: below the deepest node reached they share
// all matched tokens; below an ancestor, the ancestor's depth.
func (c *Cache) candidates(n *node, matched int, tried map[any]bool) candidates {
	var cd candidates
	depth := matched
	// A tail whose prefix no tier holds any more is passed over, then
	// dropped (tail.go).
	lost := map[*hostEntry]bool{}
	seedable := func(h *hostEntry) bool {
		if !lost[h] && c.tailLost(h) {
			lost[h] = true
		}
		return !lost[h]
	}
	defer func() {
		for h := range lost {
			c.stats.HostTailsLost.Add(1)
			c.host.remove(&c.tree, h)
		}
	}()
	for at := n; at != nil && at != &c.tree.root && (cd.res == nil || cd.host == nil || cd.park == nil); at = at.parent {
		if at != n {
			depth = at.depth
		}
		r, h, p := at.find(func(p *parkEntry) bool { return c.restorable(p, depth) }, seedable, tried)
		if cd.res == nil && r != nil {
			cd.res, cd.resDepth = r, depth
		}
		if cd.host == nil && h != nil {
			cd.host, cd.hostDepth = h, depth
		}
		if cd.park == nil && p != nil {
			cd.park, cd.parkDepth = p, depth
		}
	}
	return cd
}

// seedFromHost imports a host entry into seq and cuts it to depth tokens;
// on failure the sequence is emptied and the lane starts cold.
func (c *Cache) seedFromHost(seq int32, h *hostEntry, depth int) int {
	n, base, err := c.importHost(seq, h)
	if err != nil {
		if errors.Is(err, errNoBase) {
			c.stats.HostTailsLost.Add(1)
		} else {
			slog.Warn("prefix cache: host entry refused, admitting cold", "err", err)
		}
		c.host.remove(&c.tree, h)
		c.eng.Free(seq)
		return 0
	}
	got := min(n, depth)
	if n > depth {
		// A refused cut keeps the entry: it still serves its whole stream.
		if got = c.resumeAt(seq, depth, h.ckpts); got == 0 {
			return 0
		}
	}
	if base != nil {
		// The prefix seq shares with it is in use as the tail is, and
		// spared as seedFromResident's is: moved out, it would be copied
		// out for nothing.
		base.used, base.touched = c.clock, c.cfg.Now()
		c.seededFrom[seq] = base
	}
	h.used, h.touched = c.clock, c.cfg.Now()
	c.stats.HostHits.Add(1)
	c.inherit[seq] = checkpointsUpTo(h.ckpts, got)
	return got
}

// countHits marks the nodes a match covered, so eviction knows which
// prefixes requests share.
func (c *Cache) countHits(prefix []engine.Token) {
	n, matched := c.tree.match(prefix)
	if matched < n.depth {
		// The match ended inside n's edge: split there, so the shared
		// prefix has a node of its own to count on.
		n = c.tree.split(n, len(n.edge)-(n.depth-matched))
	}
	for ; n != nil && n != &c.tree.root; n = n.parent {
		n.hits++
	}
}

// Release takes back a leased sequence holding tokens and publishes it.
func (c *Cache) Release(seq int32, tokens []engine.Token) {
	c.lastParked = false
	c.clock++
	delete(c.leased, seq)
	delete(c.restores, seq) // a restore in flight for a lane that left
	from := c.seededFrom[seq]
	delete(c.seededFrom, seq)
	defer c.tidy()
	if len(tokens) == 0 {
		delete(c.inherit, seq) // the engine's checkpoints go with the sequence
		c.freeSeq(seq)
		return
	}
	n := c.tree.insert(tokens)
	if existing := n.resident; existing != nil || n.coveredBelow(nil) {
		// The stream is already cached (here or inside a longer entry,
		// whose checkpoints serve it: this lane's are not copied out).
		if existing != nil {
			existing.used, existing.touched = c.clock, c.cfg.Now()
			existing.ckpts = mergeCheckpoints(existing.ckpts, c.takeCheckpoints(seq, len(tokens)), maxEntryCheckpoints)
		} else {
			delete(c.inherit, seq)
		}
		c.freeSeq(seq)
		c.tree.prune(n)
		return
	}
	e := &entry{seq: seq, node: n, used: c.clock, touched: c.cfg.Now(), ckpts: c.takeCheckpoints(seq, len(tokens))}
	n.resident = e
	c.entries[seq] = e
	c.stats.Published.Add(1)
	// Entries that are strict prefixes of this one add nothing now.
	// Their checkpoints are this stream's too.
	if h := n.host; h != nil {
		e.ckpts = mergeCheckpoints(h.ckpts, e.ckpts, maxEntryCheckpoints)
		c.host.remove(&c.tree, h)
	}
	for at := n.parent; at != nil && at != &c.tree.root; at = at.parent {
		if old := at.resident; old != nil {
			e.ckpts = mergeCheckpoints(old.ckpts, e.ckpts, maxEntryCheckpoints)
			at.resident = nil
			delete(c.entries, old.seq)
			c.freeSeq(old.seq)
		}
		if h := at.host; h != nil {
			e.ckpts = mergeCheckpoints(h.ckpts, e.ckpts, maxEntryCheckpoints)
			c.host.remove(&c.tree, h)
		}
	}
	if c.cfg.ParkEager {
		c.lastParked = c.parkSeq(n, seq, false)
	}
	c.enforceBudget(e, from)
	c.publishGauges()
}

// Relieve evicts one entry (cutting it back to a shared prefix where it has
// one) after the engine ran out of KV cells; false when nothing is cached.
func (c *Cache) Relieve() bool {
	c.tidy()
	v := c.victim()
	if v == nil {
		return false
	}
	c.evict(v, c.cutBackTo(v))
	c.publishGauges()
	return true
}

func (c *Cache) freeSeq(seq int32) {
	if err := c.eng.Free(seq); err != nil {
		slog.Error("prefix cache: freeing a sequence failed", "seq", seq, "err", err)
	}
	c.free = append(c.free, seq)
}

// takeSeq pops a free sequence, evicting a whole entry when none is free.
func (c *Cache) takeSeq() (int32, error) {
	if len(c.free) == 0 {
		v := c.victim()
		if v == nil {
			return -1, ErrNoSequence
		}
		c.evict(v, nil)
		c.publishGauges()
	}
	seq := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	return seq, nil
}

// victim picks the entry to evict other than those spared: least
// recently used, entries whose prefix other requests shared later, pinned
// entries last of all.
func (c *Cache) victim(spare ...*entry) *entry {
	pinned := c.pinned()
	var best *entry
	bestShared, bestPinned := false, false
	for _, e := range c.entries {
		if slices.Contains(spare, e) {
			continue
		}
		shared, pin := c.sharedPrefix(e) != nil, pinned[e.node] > 0
		switch {
		case best == nil, !pin && bestPinned:
		case pin != bestPinned:
			continue
		case !shared && bestShared:
		case shared != bestShared || e.used >= best.used:
			continue
		}
		best, bestShared, bestPinned = e, shared, pin
	}
	return best
}

// sharedPrefix returns the deepest node on e's path, short of e's own end,
// that two or more matches covered and that is long enough to keep.
func (c *Cache) sharedPrefix(e *entry) *node {
	for at := e.node.parent; at != nil && at != &c.tree.root; at = at.parent {
		if at.hits >= 2 && at.depth >= c.cfg.MinSharedTokens {
			return at
		}
	}
	return nil
}

// exportable reports whether evicting e exports its stream to host
// memory: the tier is on, the machine is not short of memory, e is long
// enough to be worth it and not there already (a tail of it there is
// replaced: e's own stream is its whole).
func (c *Cache) exportable(e *entry) bool {
	return c.host.budget > 0 && !c.shedding && e.node.depth >= c.cfg.MinHostTokens && (e.node.host == nil || e.node.host.base > 0)
}

// evict removes e from the pool: exported to host memory first when the
// tier has room for it; cut back to keep (a node on its path: its shared
// prefix, a pin) instead of dropped where keep is not nil and the cut is
// valid. A nil keep frees its sequence (the caller needs it). With a keep,
// only the part past it is exported where the engine can (tail.go): the
// pool still holds the rest, in e or in the entry that kept e from being
// cut there.
func (c *Cache) evict(e *entry, keep *node) {
	c.stats.Evictions.Add(1)
	switch {
	case c.exportable(e):
		if keep != nil && c.exportTail(e, keep.depth) {
			break
		}
		blob, err := c.eng.Export(e.seq, nil)
		if err != nil {
			slog.Warn("prefix cache: export to host memory failed", "err", err)
			break
		}
		if !c.host.fits(len(blob) + int(checkpointBytes(e.ckpts))) {
			c.parkBlob(e.node, blob, e.ckpts, false) // too big for host memory: to disk
			break
		}
		c.host.add(&c.tree, &hostEntry{node: e.node, blob: blob, ckpts: e.ckpts, used: c.clock, touched: e.touched})
		c.stats.HostExports.Add(1)
	case e.node.host == nil:
		c.parkSeq(e.node, e.seq, false)
	}
	c.cutBack(e, keep)
}

// cutBack leaves e resident at keep (a node on its path) where keep is not
// nil and the cut is valid, else frees its sequence; its stream has been
// moved out or given up.
func (c *Cache) cutBack(e *entry, keep *node) {
	old := e.node
	old.resident = nil
	if s := keep; s != nil && s.resident == nil && !s.coveredBelow(e) && c.cutValid(e.seq, s.depth) {
		if err := c.eng.Truncate(e.seq, s.depth); err == nil {
			e.node = s
			e.ckpts = checkpointsUpTo(e.ckpts, s.depth)
			s.resident = e
			c.tree.prune(old)
			return
		}
	}
	delete(c.entries, e.seq)
	c.freeSeq(e.seq)
	c.tree.prune(old)
}

// cutBackTo is where evicting e keeps it: the deeper of its shared prefix
// and the longest live pin it begins with (short of its own end); nil to
// drop it.
func (c *Cache) cutBackTo(e *entry) *node {
	s := c.sharedPrefix(e)
	if d := c.pinned()[e.node]; d > 0 && d < e.node.depth && (s == nil || d > s.depth) {
		return c.nodeAt(e.node, d)
	}
	return s
}

// enforceBudget evicts until resident entries fit their budget. The
// entries of the conversation being served stay (conv: the fresh one just
// published, the one its prompt was seeded from): nobody has matched a
// fresh entry yet, so victim would take it before older entries others
// shared. Its next turn or edit, the usual next request, then finds it in
// the pool: a sliding-window model's can still be cut anywhere (moved out,
// it keeps only its last window, issue 22), and a full-attention model's
// is not copied to host memory and back around every turn (measured on
// synth qwen3 small, a 2,000-token conversation: 15–20 ms of an edit's
// time to first token, and an agent's long context would cross the host
// tier whole on each of its turns). Other conversations' entries leave as
// another prompt is admitted (admitted).
func (c *Cache) enforceBudget(conv ...*entry) {
	budget := c.shedBudget(c.residentBudget())
	if budget <= 0 {
		return
	}
	for c.residentTokens() > budget {
		v := c.victim(conv...)
		if v == nil {
			return
		}
		c.evict(v, c.cutBackTo(v))
	}
}

// residentTokens counts the distinct tokens resident entries cover.
func (c *Cache) residentTokens() int {
	var walk func(n *node) (int, bool)
	walk = func(n *node) (int, bool) {
		total, covered := 0, n.resident != nil
		for _, ch := range n.children {
			t, cv := walk(ch)
			total += t
			covered = covered || cv
		}
		if covered {
			total += len(n.edge)
		}
		return total, covered
	}
	t, _ := walk(&c.tree.root)
	return t
}

func (c *Cache) publishGauges() {
	c.stats.Entries.Store(int64(len(c.entries)))
	c.stats.ResidentTokens.Store(int64(c.residentTokens()))
	c.stats.HostEntries.Store(int64(len(c.host.entries)))
	c.stats.HostBytes.Store(c.host.bytes)
	c.stats.ParkedEntries.Store(int64(len(c.parked)))
	c.publishView()
}
