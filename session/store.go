package session

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"sync"
)

// Store is the durable session store. Its methods are safe for concurrent
// use; a write returns once its record is durable (or the store failed).
type Store struct {
	dir  string
	opt  Options
	lock *os.File // flock on dir/LOCK: one process per directory

	mu      sync.Mutex
	cond    *sync.Cond // signals the committer: records pending, or closing
	st      *state
	closing bool
	failed  error // the first write error; every later write fails with it
	stats   Stats

	// The group the next records join: their bytes and their waiters.
	pending     []byte
	pendingRecs int
	waiters     *batch
	spare       []byte

	// Owned by the committer goroutine (by Open before it starts).
	log      *os.File
	gen      uint64
	logBytes int64 // also read under mu
	done     chan struct{}

	beforeWrite func() // a test's hook: runs before each group's write
}

// batch is one group commit's waiters: done closes when its records are
// durable or failed (err).
type batch struct {
	done chan struct{}
	err  error
}

func (b *batch) wait() error {
	<-b.done
	return b.err
}

func (s *Store) now() int64 { return s.opt.Now().Unix() }

// expired says whether c is past retention: it reads as not found.
func (s *Store) expired(c *conv) bool {
	return s.opt.Retention > 0 && c.touched < s.opt.Now().Add(-s.opt.Retention).Unix()
}

// live finds a conversation a caller may see; mu held.
func (s *Store) live(id string) (*conv, error) {
	if err := checkID("conversation", id); err != nil {
		return nil, err
	}
	c, err := s.st.conv(id)
	if err != nil {
		return nil, err
	}
	if s.expired(c) {
		return nil, fmt.Errorf("session: conversation %s: %w (expired)", id, ErrNotFound)
	}
	return c, nil
}

func (c *conv) header() Conversation {
	return Conversation{ID: c.id, Metadata: maps.Clone(c.meta), CreatedAt: c.created, Len: len(c.items)}
}

// dropExpired drops the conversations retention has ended and the pins
// past their expiry; mu held. A snapshot about to be written records the
// drop itself (logged false); anywhere else each conversation's drop is
// logged as a delete, or a replay would find it still there and refuse a
// later record that reuses one of its item ids. A pin needs no record: a
// later pin of its key replaces it in a replay too.
func (s *Store) dropExpired(logged bool) {
	now := s.opt.Now()
	if s.opt.Retention > 0 {
		cutoff := now.Add(-s.opt.Retention).Unix()
		for _, c := range s.st.convs {
			if c.touched >= cutoff {
				continue
			}
			if !logged {
				s.st.dropConv(c)
			} else if _, err := s.write(&event{Op: opDelete, Conv: c.id}, 0); err != nil {
				return // the store failed or closes: the write that asked fails too
			}
			s.stats.Expired++
		}
	}
	for k, p := range s.st.pins {
		if !p.Expires.After(now) {
			s.st.dropPin(k)
			s.stats.Expired++
		}
	}
}

// write applies ev and queues its record for the next group commit; mu
// held. growth bounds how much ev adds to the live content (MaxBytes).
func (s *Store) write(ev *event, growth int64) (*batch, error) {
	if s.closing {
		return nil, ErrClosed
	}
	if s.failed != nil {
		return nil, fmt.Errorf("session: store failed earlier: %w", s.failed)
	}
	if growth > 0 && s.opt.MaxBytes > 0 && s.st.bytes+growth > s.opt.MaxBytes {
		s.dropExpired(true)
		if s.st.bytes+growth > s.opt.MaxBytes {
			return nil, fmt.Errorf("session: %s of %d bytes: %w (%d of %d bytes live)", ev.Op, growth, ErrQuota, s.st.bytes, s.opt.MaxBytes)
		}
	}
	payload, err := encodePayload(ev)
	if err != nil {
		return nil, err
	}
	if len(payload) > maxRecordBytes {
		return nil, fmt.Errorf("session: %s record of %d bytes: %w (at most %d)", ev.Op, len(payload), ErrQuota, maxRecordBytes)
	}
	if err := s.st.apply(ev); err != nil {
		return nil, err
	}
	if s.waiters == nil {
		s.waiters = &batch{done: make(chan struct{})}
	}
	s.pending = appendRecord(s.pending, payload)
	s.pendingRecs++
	s.cond.Signal()
	return s.waiters, nil
}

func (s *Store) checkConvQuota() error {
	if s.opt.MaxConversations > 0 && len(s.st.convs) >= s.opt.MaxConversations {
		s.dropExpired(true)
		if len(s.st.convs) >= s.opt.MaxConversations {
			return fmt.Errorf("session: %w: %d conversations, at most %d", ErrQuota, len(s.st.convs), s.opt.MaxConversations)
		}
	}
	return nil
}

func (s *Store) checkLen(id string, n int) error {
	if s.opt.MaxItemsPerConversation > 0 && n > s.opt.MaxItemsPerConversation {
		return fmt.Errorf("session: conversation %s: %w: %d items, at most %d", id, ErrQuota, n, s.opt.MaxItemsPerConversation)
	}
	return nil
}

// change makes one change: decide, under the lock, checks the request
// against the state and returns its event and what it adds to the live
// content; the event is applied and queued; read, under the same lock,
// takes what the caller returns; then change waits until the record is
// durable.
func (s *Store) change(decide func() (*event, int64, error), read func()) error {
	s.mu.Lock()
	ev, growth, err := decide()
	var b *batch
	if err == nil {
		b, err = s.write(ev, growth)
	}
	if err == nil && read != nil {
		read()
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return b.wait()
}

// records turns prepared items into a create's or append's records: an
// item whose id is stored already, with the same type and data, is shared
// (a record of its id alone, and the stored item returned in its place);
// one whose id is stored with other content is refused. It returns the
// records, the items as stored and what they add to the live content; mu
// held.
func (s *Store) records(items []Item) ([]itemRec, []Item, int64, error) {
	recs := toRecs(items)
	var growth int64
	for i := range items {
		growth += refCost(items[i].ID)
		stored := s.st.items[items[i].ID]
		if stored == nil {
			growth += itemCost(&items[i])
			continue
		}
		if stored.Type != items[i].Type || !bytes.Equal(stored.Data, items[i].Data) {
			return nil, nil, 0, fmt.Errorf("session: item %s: %w: that id is stored with other content", items[i].ID, ErrInvalid)
		}
		recs[i] = itemRec{ID: stored.ID}
		items[i] = stored.Item
	}
	return recs, items, growth, nil
}

// Stats returns the store's counters and gauges.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.LogBytes = s.logBytes
	st.LiveBytes = s.st.bytes
	st.Conversations = len(s.st.convs)
	st.Items = len(s.st.items)
	st.Pins = len(s.st.pins)
	if s.failed != nil {
		st.Failed = s.failed.Error()
	}
	return st
}
