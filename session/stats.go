package session

// Stats are a store's counters (since Open) and gauges (now), for the
// server to publish.
type Stats struct {
	Records       int64    // records written to the log
	Bytes         int64    // bytes written to the log
	Fsyncs        int64    // fsyncs of the log, the snapshot and the directory
	Groups        int64    // group commits: one write and one fsync each
	MaxGroup      int      // the most records one group commit carried
	GroupSizes    [6]int64 // group commits of 1, 2-3, 4-7, 8-15, 16-31 and 32+ records
	TornTails     int64    // torn or corrupt log tails dropped at Open
	TornBytes     int64    // the bytes they held
	Compactions   int64    // snapshots written (each begins a fresh log)
	Expired       int64    // conversations and pins dropped by retention or expiry
	LogBytes      int64    // the log's size
	SnapshotBytes int64    // the snapshot's size
	LiveBytes     int64    // the live content's estimated size (what MaxBytes bounds)
	Conversations int
	Items         int // distinct stored items
	Pins          int
	Failed        string // the write error that stopped the store, "" while it works
}

// groupBucket is the GroupSizes index for a group of n records.
func groupBucket(n int) int {
	b := 0
	for n > 1 && b < 5 {
		n >>= 1
		b++
	}
	return b
}
