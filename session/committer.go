package session

import (
	"fmt"
)

// commit is the committer goroutine: it takes every record queued since
// its last write and makes them durable with one write and one fsync, so
// writers that arrive while an fsync runs share the next one. When the log
// has outgrown its bound it writes a snapshot instead (compact.go); the
// queued records are in the state it freezes, so they are durable with it.
func (s *Store) commit() {
	defer close(s.done)
	for {
		s.mu.Lock()
		for s.pendingRecs == 0 && !s.closing {
			s.cond.Wait()
		}
		if s.pendingRecs == 0 { // closing, and nothing left to write
			s.mu.Unlock()
			return
		}
		buf, recs, b := s.pending, s.pendingRecs, s.waiters
		s.pending, s.pendingRecs, s.waiters, s.spare = s.spare[:0], 0, nil, nil
		if s.failed != nil {
			b.err = fmt.Errorf("session: store failed earlier: %w", s.failed)
			s.mu.Unlock()
			close(b.done)
			continue
		}
		if s.logBytes+int64(len(buf)) > s.compactAt() {
			v := s.freeze()
			s.mu.Unlock()
			b.err = s.compact(v)
			close(b.done)
			continue
		}
		s.mu.Unlock()

		err := s.appendLog(buf)

		s.mu.Lock()
		if cap(buf) <= maxSpare {
			s.spare = buf
		}
		if err != nil {
			s.failed = err
			b.err = err
		} else {
			s.logBytes += int64(len(buf))
			s.stats.Records += int64(recs)
			s.stats.Bytes += int64(len(buf))
			s.stats.Fsyncs++
			s.stats.Groups++
			s.stats.MaxGroup = max(s.stats.MaxGroup, recs)
			s.stats.GroupSizes[groupBucket(recs)]++
		}
		s.mu.Unlock()
		close(b.done)
	}
}

// maxSpare is the largest group buffer kept for the next group: a rare
// large one is left to the collector.
const maxSpare = 4 << 20

// appendLog writes one group's records at the log's end and fsyncs. A
// failed or short write leaves at most a torn tail, which Open drops.
func (s *Store) appendLog(buf []byte) error {
	if s.beforeWrite != nil {
		s.beforeWrite()
	}
	if _, err := s.log.Write(buf); err != nil {
		return fmt.Errorf("session: writing the log: %w", err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("session: syncing the log: %w", err)
	}
	return nil
}

// compactAt is the log size that starts a compaction: CompactBytes, or the
// snapshot's size when that is larger, so rewriting the live state costs
// at most one byte per byte of log (mu held).
func (s *Store) compactAt() int64 {
	return max(s.opt.CompactBytes, s.stats.SnapshotBytes)
}
