package kv

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"time"

	"superfluid/engine"
	"superfluid/park"
)

// parkEntry is a stream parked on disk (or queued to be) by package park.
type parkEntry struct {
	node *node
	name string // the park file's name
	used uint64
	// ckptPos are the positions of the checkpoints the file holds.
	ckptPos []int
	// set is the LoRA adapter set the file says its stream was computed
	// under: it seeds a prompt only while its namespace names that set.
	set engine.AdapterSetID
}

// indexParked makes the park directory's files entries, oldest first so
// the cache clock orders them by recency. Streams longer than the context
// could not be imported: left out (and left on disk, for a larger one).
func (c *Cache) indexParked() {
	metas := c.park.List()
	ctx := c.eng.Descriptor().Ctx
	for i := len(metas) - 1; i >= 0; i-- {
		m := metas[i]
		if ctx > 0 && len(m.Tokens) > ctx {
			continue
		}
		c.clock++
		n := c.tree.insert(m.Tokens)
		p := &parkEntry{node: n, name: m.Name, used: c.clock, ckptPos: m.Checkpoints, set: m.Set}
		n.park = p
		c.parked[m.Name] = p
	}
}

// Tidy applies what the park writer did since the last call (files swept,
// superseded, failed) and parks entries idle past Config.ParkIdle. Every
// Acquire, Release and Relieve does it; an owner with an idle timer may
// call it too, so that a server nobody calls still parks on time. Owner
// goroutine only.
func (c *Cache) Tidy() { c.tidy() }

func (c *Cache) tidy() {
	if c.park == nil {
		return
	}
	for _, name := range c.park.Gone() {
		// A name reported gone may have been parked again since (a
		// refused file's stream, published anew): that entry stays.
		if p := c.parked[name]; p != nil && !c.park.Holds(name) {
			c.dropPark(p)
		}
	}
	c.parkIdle(c.cfg.Now())
}

func (c *Cache) dropPark(p *parkEntry) {
	if c.parked[p.name] == p {
		delete(c.parked, p.name)
	}
	if p.node.park == p {
		p.node.park = nil
		c.tree.prune(p.node)
	}
}

// restorable reports whether a parked entry can seed a prompt sharing
// depth of its tokens: restoring a longer stream and cutting it back needs
// an engine that can truncate inside a sequence, a sliding window whose
// cells may still reach back there (resumeAt decides), or a checkpoint.
func (c *Cache) restorable(p *parkEntry, depth int) bool {
	if set, ok := c.setOf(p.node); !ok || set != p.set {
		return false // another set's stream in a namespace reused since
	}
	d := c.eng.Descriptor()
	switch {
	case depth >= p.node.depth, d.Partial == engine.PartialNone && d.PartialTruncation, d.Partial == engine.PartialSWA:
		return true
	}
	for _, pos := range p.ckptPos {
		if pos > 0 && pos <= depth {
			return true
		}
	}
	return false
}

// seedFromPark restores a parked stream into seq and cuts it to depth
// tokens, all on the owner's goroutine (AcquireRestoring reads the file on
// a reader goroutine instead; see restore.go). Reading, verifying,
// decompressing and importing 2,000 tokens of the 0.5B model takes tens of
// milliseconds against tens of seconds to prefill them (see
// park_bench_test.go in e2e), which is why a file that fails is never
// tried again: one that fails verification the store counted (and
// removed, if damaged) and remembers; one the engine will not import the
// store remembers as unusable but keeps on disk (the pool may just have
// been short of cells: a later run may restore it). Either way the entry
// leaves the index and the caller tries the next best.
func (c *Cache) seedFromPark(seq int32, p *parkEntry, depth int) int {
	start := time.Now()
	toks := p.node.path()
	blob, ckpts, err := c.loadParked(p.set, toks, c.restoreBuf)
	return c.importParked(seq, p, toks, depth, blob, ckpts, err, time.Since(start))
}

// loadParked reads, verifies and decompresses the stream parked for toks.
// The store decodes with one scratch buffer, so loads take turns; any
// goroutine.
func (c *Cache) loadParked(set engine.AdapterSetID, toks []engine.Token, dst []byte) ([]byte, []engine.Checkpoint, error) {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	return c.park.LoadSet(set, toks, dst)
}

// importParked imports what loadParked returned for p (blob and its
// checkpoints, or err, read in read) into seq and cuts it to depth tokens
// (or resumes it at a checkpoint before); 0 when the read or the import
// failed, seq then empty. Owner goroutine.
func (c *Cache) importParked(seq int32, p *parkEntry, toks []engine.Token, depth int, blob []byte, ckpts []engine.Checkpoint, err error, read time.Duration) int {
	start := time.Now()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			slog.Debug("prefix cache: parked file gone", "file", p.name)
		}
		c.dropPark(p)
		c.stats.ParkFailures.Add(1)
		return 0
	}
	n, err := c.eng.Import(seq, blob)
	c.keepRestoreBuf(blob)
	if err == nil && n != len(toks) {
		c.park.Refuse(toks, park.ReasonTokens, fmt.Errorf("the engine restored %d tokens of a %d-token file", n, len(toks)))
		c.dropPark(p)
		c.eng.Free(seq)
		c.stats.ParkFailures.Add(1)
		return 0
	}
	if err == nil && n > depth {
		// A cut the state cannot take leaves the file in the index: it
		// still serves its whole stream.
		if depth = c.resumeAt(seq, depth, ckpts); depth == 0 {
			return 0
		}
	}
	if err == nil {
		c.inherit[seq] = checkpointsUpTo(ckpts, depth)
	}
	if err != nil {
		c.park.Unusable(toks, err)
		c.dropPark(p)
		c.eng.Free(seq)
		c.stats.ParkFailures.Add(1)
		return 0
	}
	took := read + time.Since(start)
	p.used = c.clock
	c.stats.ParkHits.Add(1)
	c.stats.ParkRestoreNanos.Add(int64(took))
	c.stats.ParkRestoreLastNanos.Store(int64(took))
	return depth
}

// keepRestoreBuf keeps a restore's buffer for the next one (the engine
// has copied the state out of it), unless it is large: a fresh buffer
// costs its page faults (tens of milliseconds per 100 MB), a kept one its
// memory between restores.
func (c *Cache) keepRestoreBuf(b []byte) {
	if cap(b) <= 64<<20 {
		c.restoreBuf = b[:0]
	} else {
		c.restoreBuf = nil
	}
}

// parkSeq parks the stream of node n, which seq holds: exported here (a
// copy out of the KV pool, on the owner's goroutine), compressed and
// written by the park writer. It reports whether the stream is parked or
// queued; false when it is too short, the export failed, or the write was
// dropped.
func (c *Cache) parkSeq(n *node, seq int32, wait bool) bool {
	if c.park == nil || n.depth < c.cfg.MinParkTokens {
		return false
	}
	if n.park != nil {
		return true
	}
	if !wait && c.park.Busy(int64(n.depth)*c.eng.Descriptor().KVBytesPerToken) {
		return false
	}
	blob, err := c.eng.Export(seq, nil)
	if err != nil {
		slog.Warn("prefix cache: export for parking failed", "err", err)
		return false
	}
	var ckpts []engine.Checkpoint
	if e := c.entries[seq]; e != nil {
		ckpts = e.ckpts
	}
	return c.parkBlob(n, blob, ckpts, wait)
}

// parkHost is the host tier's word that its budget pushes h out.
func (c *Cache) parkHost(h *hostEntry) { c.parkHostEntry(h, false) }

// parkHostEntry parks h's stream, a tail put together whole first; false
// when it is not parked or queued. A tail that cannot be put together
// (its prefix gone, or no free sequence or cells to do it in: pushed out
// of host memory by an eviction that needed the last sequence) is counted
// lost.
func (c *Cache) parkHostEntry(h *hostEntry, wait bool) bool {
	if c.park == nil || h.node.depth < c.cfg.MinParkTokens {
		return false
	}
	if h.base == 0 {
		return c.parkBlob(h.node, h.blob, h.ckpts, wait)
	}
	if set, ok := c.setOf(h.node); ok && h.node.park != nil && h.node.park.set == set {
		return true // on disk already (eager parking): nothing to put together
	}
	if !wait && c.park.Busy(int64(h.node.depth)*c.eng.Descriptor().KVBytesPerToken) {
		return false // as parkSeq: not put together only to be dropped
	}
	blob, err := c.wholeBlob(h)
	if err != nil {
		c.stats.HostTailsLost.Add(1)
		slog.Debug("prefix cache: a tail in host memory not parked", "err", err)
		return false
	}
	return c.parkBlob(h.node, blob, h.ckpts, wait)
}

// parkBlob queues n's exported state for parking. Parked strict prefixes
// of n go once n's file is written: n serves every prompt they would.
func (c *Cache) parkBlob(n *node, blob []byte, ckpts []engine.Checkpoint, wait bool) bool {
	if c.park == nil || n.depth < c.cfg.MinParkTokens {
		return false
	}
	set, ok := c.setOf(n)
	if !ok {
		return false
	}
	if n.park != nil && n.park.set != set {
		c.dropPark(n.park) // another set's, in a namespace reused since: replaced
	}
	if n.park != nil {
		return true
	}
	var supersedes []string
	for at := n.parent; at != nil && at != &c.tree.root; at = at.parent {
		if at.park != nil {
			supersedes = append(supersedes, at.park.name)
		}
	}
	toks := n.path()
	if !c.park.PutSet(set, toks, blob, ckpts, supersedes, wait) {
		return false
	}
	p := &parkEntry{node: n, name: park.Name(toks), used: c.clock, set: set}
	for _, cp := range ckpts {
		p.ckptPos = append(p.ckptPos, cp.Pos)
	}
	n.park = p
	c.parked[p.name] = p
	c.stats.Parks.Add(1)
	return true
}

// parkIdle parks and evicts the entries no one has used for ParkIdle:
// their room in the pool (and host memory) goes back to live requests, and
// their state survives a crash. Pinned entries stay until their pin ends.
// An entry too short to park is just evicted; one whose write is dropped
// stays, to be tried again on a later call. Host memory goes first: a
// tail there is put together from the resident prefix it continues
// (tail.go), which may be idle too.
func (c *Cache) parkIdle(now time.Time) {
	idle := c.cfg.ParkIdle
	if idle <= 0 {
		return
	}
	changed := false
	pinned := c.pinned()
	hs := slices.Clone(c.host.entries)
	// Tails before whole streams, which may be their prefix.
	slices.SortStableFunc(hs, func(a, b *hostEntry) int { return cmp.Compare(b.base, a.base) })
	for _, h := range hs {
		if now.Sub(h.touched) < idle || pinned[h.node] > 0 {
			continue
		}
		if h.node.depth >= c.cfg.MinParkTokens && c.parkable(h.node) && !c.parkHostEntry(h, false) && !c.tailLost(h) {
			continue
		}
		c.host.remove(&c.tree, h)
		c.stats.IdleParks.Add(1)
		changed = true
	}
	for _, e := range c.entries {
		if now.Sub(e.touched) < idle || pinned[e.node] > 0 {
			continue
		}
		if e.node.depth >= c.cfg.MinParkTokens && c.parkable(e.node) && !c.parkSeq(e.node, e.seq, false) {
			continue
		}
		e.node.resident = nil
		delete(c.entries, e.seq)
		c.freeSeq(e.seq)
		c.tree.prune(e.node)
		c.stats.IdleParks.Add(1)
		changed = true
	}
	if changed {
		c.publishGauges()
	}
}

// Close parks every resident and host-memory entry not yet on disk (most
// recently used first, waiting for room in the writer's queue rather than
// dropping), waits for the writer, and closes the park store. Call it once
// the scheduler has stopped — its goroutine owned the cache; this one does
// now — and before the engine is closed. Without a park store it does
// nothing.
func (c *Cache) Close() error {
	if c.park == nil {
		return nil
	}
	c.readers.Wait() // restores in flight read from the store
	c.tidy()
	es := make([]*entry, 0, len(c.entries))
	for _, e := range c.entries {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(b.used, a.used) })
	for _, e := range es {
		c.parkSeq(e.node, e.seq, true)
	}
	hs := slices.Clone(c.host.entries)
	slices.SortFunc(hs, func(a, b *hostEntry) int { return cmp.Compare(b.used, a.used) })
	for _, h := range hs {
		if h.base > 0 && len(c.free) == 0 {
			c.freeParkedEntry(hs)
		}
		c.parkHostEntry(h, true)
	}
	err := c.park.Close()
	c.publishGauges()
	return err
}

// freeParkedEntry frees the sequence of a resident entry already parked
// that no tail among hs continues, for a tail to be put together in as
// the cache closes, when every sequence holds an entry.
func (c *Cache) freeParkedEntry(hs []*hostEntry) {
	needed := map[*entry]bool{}
	for _, h := range hs {
		if h.base > 0 {
			if r, _ := c.baseOf(h, nil); r != nil {
				needed[r] = true
			}
		}
	}
	for _, e := range c.entries {
		if e.node.park != nil && !needed[e] {
			c.cutBack(e, nil)
			return
		}
	}
}

// ParkStats returns the disk tier's counters, nil when it is off. Any
// goroutine.
func (c *Cache) ParkStats() *park.Stats {
	if c.park == nil {
		return nil
	}
	return c.park.Stats()
}
