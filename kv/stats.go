package kv

import "sync/atomic"

// Stats are the cache's counters and gauges, readable from any goroutine.
type Stats struct {
	Hits, Misses   atomic.Int64 // acquisitions with and without a warm prefix
	WarmTokens     atomic.Int64 // prompt tokens acquisitions found cached
	HostHits       atomic.Int64 // warm prefixes imported from host memory
	Published      atomic.Int64 // streams published by retiring lanes
	Evictions      atomic.Int64
	HostExports    atomic.Int64
	Entries        atomic.Int64 // resident entries now
	ResidentTokens atomic.Int64 // distinct tokens they hold
	HostEntries    atomic.Int64
	HostBytes      atomic.Int64
}

// Stats returns the live counters.
func (c *Cache) Stats() *Stats { return &c.stats }
