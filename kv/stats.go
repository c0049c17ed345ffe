package kv

import "sync/atomic"

// Stats are the cache's counters and gauges, readable from any goroutine.
type Stats struct {
	Hits, Misses atomic.Int64 // acquisitions with and without a warm prefix
	WarmTokens   atomic.Int64 // prompt tokens acquisitions found cached
	HostHits     atomic.Int64 // warm prefixes imported from host memory
	Published    atomic.Int64 // streams published by retiring lanes
	Evictions    atomic.Int64
	HostExports  atomic.Int64
	// HostTails counts exports of only the part of a stream past a prefix
	// the pool keeps (tail.go); HostTailsLost, tails dropped because the
	// prefix they continue was no longer cached, or because no sequence
	// was free to put them together for disk.
	HostTails, HostTailsLost atomic.Int64
	Entries                  atomic.Int64 // resident entries now
	ResidentTokens           atomic.Int64 // distinct tokens they hold
	HostEntries              atomic.Int64
	HostBytes                atomic.Int64

	// Partial state (partial.go): seeds resumed from a checkpoint; cuts
	// the model's state could not take, served by a shorter prefix or
	// cold; seeded sequences that did not hold what the seed said, reset
	// to cold before admission; bytes of checkpoints copied out of the
	// engine as lanes retired (only those the cache keeps).
	CheckpointResumes     atomic.Int64
	CutRefusals           atomic.Int64
	SeedMismatches        atomic.Int64
	CheckpointBytesCopied atomic.Int64

	// The disk tier (package park counts files, bytes and refusals).
	Parks                atomic.Int64 // streams the cache queued for parking
	ParkHits             atomic.Int64 // warm prefixes restored from disk
	ParkFailures         atomic.Int64 // restores that fell back (refused, gone, or not imported)
	ParkRestoreNanos     atomic.Int64 // time the successful restores took, in all
	ParkRestoreLastNanos atomic.Int64 // the last one's
	IdleParks            atomic.Int64 // entries parked and evicted for idleness
	ParkedEntries        atomic.Int64 // parked entries now
}

// Stats returns the live counters.
func (c *Cache) Stats() *Stats { return &c.stats }
