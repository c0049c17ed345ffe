package session

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"superfluid/flock"
)

// Open opens (or makes) the store in dir, which it owns alone (a lock file
// keeps a second process out). It reads the snapshot, replays the log,
// drops a torn or corrupt tail, drops what retention has ended, and
// compacts when the log is past its bound.
func Open(dir string, opt Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("session: no directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	lock, err := flock.Dir(dir)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	s := &Store{dir: dir, opt: opt.withDefaults(), lock: lock, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	if err := s.recover(); err != nil {
		if s.log != nil {
			s.log.Close()
		}
		lock.Close()
		return nil, err
	}
	go s.commit()
	return s, nil
}

// Close writes what is queued, stops the committer and releases the
// directory. Writes after it fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.done
	err := s.log.Close()
	s.lock.Close()
	if err != nil {
		return fmt.Errorf("session: closing the log: %w", err)
	}
	return nil
}

func (s *Store) recover() error {
	if err := os.Remove(filepath.Join(s.dir, snapTmpName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("session: %w", err)
	}
	s.st, s.gen = newState(), 1
	if err := s.loadSnapshot(); err != nil {
		return err
	}
	if err := s.recoverLog(); err != nil {
		return err
	}
	if err := s.removeStrayLogs(); err != nil {
		return err
	}
	s.dropExpired(false)
	if s.stats.Expired > 0 || s.logBytes > s.compactAt() {
		return s.compact(s.freeze())
	}
	return nil
}

// loadSnapshot reads the snapshot, when there is one, as the state.
func (s *Store) loadSnapshot() error {
	path := filepath.Join(s.dir, snapName)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	gen, st, err := loadSnapshot(f, info.Size())
	if err != nil {
		return fmt.Errorf("session: the snapshot %s is damaged: %w", path, err)
	}
	s.st, s.gen = st, gen
	s.stats.SnapshotBytes = info.Size()
	return nil
}

// recoverLog replays the generation's log onto the state and truncates it
// after its last good record, or makes it when there is none.
func (s *Store) recoverLog() error {
	path := filepath.Join(s.dir, walName(s.gen))
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		s.log, err = s.createLog(s.gen)
		s.logBytes = headerLen
		return err
	}
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	s.log = f // closed by Open when recovery fails
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	size := info.Size()
	good, fresh := size, false // fresh: the header itself is torn, and the file is begun again
	var h [headerLen]byte
	if size < headerLen {
		good, fresh = 0, true
	} else if _, err := io.ReadFull(f, h[:]); err != nil {
		return fmt.Errorf("session: reading the log: %w", err)
	} else if gen, herr := readHeader(h[:], logMagic); herr != nil || gen != s.gen {
		good, fresh = 0, true
	} else if n, rerr := replay(f, size-headerLen, s.st); rerr != nil {
		good = headerLen + n
	}
	if good < size || fresh {
		if good < size {
			s.stats.TornTails++
			s.stats.TornBytes += size - good
		}
		if err := f.Truncate(good); err != nil {
			return fmt.Errorf("session: dropping the log's torn tail: %w", err)
		}
		if fresh {
			if _, err := f.WriteAt(header(logMagic, s.gen), 0); err != nil {
				return fmt.Errorf("session: rewriting the log's header: %w", err)
			}
			good = headerLen
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("session: dropping the log's torn tail: %w", err)
		}
		s.stats.Fsyncs++
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	s.logBytes = good
	return nil
}

// removeStrayLogs deletes logs of other generations: an old one a crash
// left behind a completed compaction, or a new one an interrupted
// compaction began.
func (s *Store) removeStrayLogs() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "wal-") && strings.HasSuffix(name, ".log") && name != walName(s.gen) {
			if err := os.Remove(filepath.Join(s.dir, name)); err != nil {
				return fmt.Errorf("session: %w", err)
			}
		}
	}
	return nil
}
