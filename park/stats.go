package park

import "sync/atomic"

// Stats are a Store's counters and gauges, readable from any goroutine.
type Stats struct {
	Queued      atomic.Int64 // writes accepted onto the queue
	Dropped     atomic.Int64 // writes dropped: the queue was full
	TooBig      atomic.Int64 // writes dropped: one file would exceed the budget
	Parks       atomic.Int64 // files written
	LossyParks  atomic.Int64 // of which demoted to 8 bits
	LossyFalls  atomic.Int64 // lossy asked, but the state had nothing to demote or could not be read: parked losslessly
	WriteErrors atomic.Int64 // writes that failed (directory gone, read-only, full)
	BytesRaw    atomic.Int64 // exported state bytes parked
	BytesFile   atomic.Int64 // file bytes written for them
	WriteNanos  atomic.Int64 // time spent compressing and writing

	Reads     atomic.Int64 // files opened for a restore, whatever came of it
	Loads     atomic.Int64 // files read, verified and decoded
	LoadBytes atomic.Int64 // file bytes read by them
	LoadRaw   atomic.Int64 // state bytes they decoded to
	LoadNanos atomic.Int64 // time spent reading, verifying and decoding
	Refused   [NumReasons]atomic.Int64

	Swept      atomic.Int64 // files removed by the budget
	Superseded atomic.Int64 // files removed because a longer stream was parked
	StaleTemps atomic.Int64 // temporary files of interrupted writes removed at start-up
	Migrated   atomic.Int64 // files of the flat layout moved into the identity's subdirectory at start-up
	Foreign    atomic.Int64 // files of the flat layout left there at start-up: another identity's, or unreadable

	Files atomic.Int64 // park files in the directory now
	Bytes atomic.Int64 // their size
}

// Ratio is file bytes over state bytes for everything parked so far (0
// before the first park).
func (s *Stats) Ratio() float64 {
	raw := s.BytesRaw.Load()
	if raw == 0 {
		return 0
	}
	return float64(s.BytesFile.Load()) / float64(raw)
}
