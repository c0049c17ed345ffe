package kv

import (
	"time"

	"superfluid/engine"
	"superfluid/panics"
)

// Restores off the owner's goroutine. Reading a parked stream — the file,
// its CRC, zstd, the FNV checksum — is the slow part of a restore (about
// 4 GB for an 8k-token 7B f16 stream); importing it into the KV pool is a
// copy. AcquireRestoring hands the read to a reader goroutine and the
// sequence back empty, so the scheduler's other lanes keep stepping;
// FinishRestore, on the owner, imports what was read. A read that fails
// leaves the sequence empty and the lane prefills cold, as a failed
// synchronous restore does.

// restore is a read in flight (or done) for a leased sequence.
type restore struct {
	entry *parkEntry
	toks  []engine.Token // the parked stream's tokens
	depth int            // how many of them the prompt shares
	done  chan struct{}  // closed when blob or err is set
	blob  []byte
	ckpts []engine.Checkpoint
	err   error
	read  time.Duration
}

// AcquireRestoring is Acquire, except that when the best seed is a parked
// stream its file is not read here: the sequence comes back empty (cached
// 0) with restoring true, a reader goroutine reads, verifies and
// decompresses the file and then calls ready (from its own goroutine),
// and the owner calls FinishRestore(seq) to import it. Owner goroutine.
func (c *Cache) AcquireRestoring(tokens []engine.Token, ready func()) (seq int32, cached int, restoring bool, err error) {
	c.lastTier = ""
	if c.park == nil || len(tokens) < 2 {
		seq, cached, err = c.Acquire(tokens)
		return seq, cached, false, err
	}
	c.clock++
	c.tidy()
	seq, err = c.takeSeq()
	if err != nil {
		return -1, 0, false, err
	}
	c.leased[seq] = true
	n, matched := c.tree.match(tokens)
	cd := c.candidates(n, matched, nil)
	limit := len(tokens) - 1
	pk := min(cd.parkDepth, limit)
	if cd.park == nil || pk <= max(min(cd.resDepth, limit), min(cd.hostDepth, limit)) || pk < c.cfg.MinParkTokens {
		// Memory seeds it, or what the disk shares is not worth reading
		// (shorter than a stream worth parking).
		cached = c.seed(seq, tokens, limit, false)
		if !c.sound(seq, cached) {
			cached = 0
		}
		c.countAcquire(tokens, cached)
		c.admitted(seq)
		return seq, cached, false, nil
	}
	c.admitted(seq)
	r := &restore{entry: cd.park, toks: cd.park.node.path(), depth: pk, done: make(chan struct{})}
	c.restores[seq] = r
	c.lastTier = "parked"
	buf := c.restoreBuf
	c.restoreBuf = nil
	c.readers.Add(1)
	go func() {
		defer c.readers.Done()
		start := time.Now()
		c.readRestore(r, buf)
		r.read = time.Since(start)
		close(r.done)
		if ready != nil {
			ready()
		}
	}()
	return seq, 0, true, nil
}

// readRestore reads r's file on the reader goroutine. A panic reading it
// (a file no check caught) fails this restore alone, as a read error does:
// the lane prefills cold, and the reader's goroutine ends as usual.
func (c *Cache) readRestore(r *restore, buf []byte) {
	defer func() {
		if v := recover(); v != nil {
			r.blob, r.ckpts, r.err = nil, nil, panics.Recovered(panics.Restore, v, "tokens", len(r.toks))
		}
	}()
	if hook := c.cfg.BeforeRestoreRead; hook != nil {
		hook(len(r.toks))
	}
	r.blob, r.ckpts, r.err = c.loadParked(r.entry.set, r.toks, buf)
}

// FinishRestore imports the stream read for seq (whose read has ended:
// ready was called) and returns how many tokens of the prompt seq now
// holds; 0 when the read or the import failed, seq then empty and the
// lane prefilling cold. Owner goroutine.
func (c *Cache) FinishRestore(seq int32) int {
	r := c.restores[seq]
	if r == nil {
		return 0
	}
	<-r.done
	delete(c.restores, seq)
	// The entry may have left the index while its file was read (swept,
	// superseded): the state read is still the stream's.
	got := c.importParked(seq, r.entry, r.toks, r.depth, r.blob, r.ckpts, r.err, r.read)
	if !c.sound(seq, got) {
		got = 0
	}
	c.countAcquire(r.toks, got)
	c.publishGauges()
	return got
}
