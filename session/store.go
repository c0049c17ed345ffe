package session

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
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

// Create makes a conversation with metadata and its first items; it
// returns them as stored (ids and times filled in).
func (s *Store) Create(meta map[string]string, items []Item) (Conversation, []Item, error) {
	if err := checkMetadata(meta); err != nil {
		return Conversation{}, nil, err
	}
	now := s.now()
	items, err := prepareItems(items, s.opt.MaxItemBytes, now)
	if err != nil {
		return Conversation{}, nil, err
	}
	s.mu.Lock()
	err = s.checkConvQuota()
	id := newID("conv_")
	if err == nil {
		err = s.checkLen(id, len(items))
	}
	var recs []itemRec
	var growth int64
	if err == nil {
		recs, items, growth, err = s.records(items)
	}
	var b *batch
	var c Conversation
	if err == nil {
		ev := &event{Op: opCreate, Conv: id, At: now, Meta: meta, Items: recs}
		b, err = s.write(ev, convCost(id, meta)+growth)
	}
	if err == nil {
		c = s.st.convs[id].header()
	}
	s.mu.Unlock()
	if err != nil {
		return Conversation{}, nil, err
	}
	if err := b.wait(); err != nil {
		return Conversation{}, nil, err
	}
	return c, items, nil
}

// Get returns a conversation's header.
func (s *Store) Get(id string) (Conversation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.live(id)
	if err != nil {
		return Conversation{}, err
	}
	return c.header(), nil
}

// SetMetadata replaces a conversation's metadata.
func (s *Store) SetMetadata(id string, meta map[string]string) (Conversation, error) {
	if err := checkMetadata(meta); err != nil {
		return Conversation{}, err
	}
	s.mu.Lock()
	c, err := s.live(id)
	var b *batch
	var h Conversation
	if err == nil {
		b, err = s.write(&event{Op: opSetMeta, Conv: id, At: s.now(), Meta: meta}, metaCost(meta))
	}
	if err == nil {
		h = c.header()
	}
	s.mu.Unlock()
	return h, s.await(b, err)
}

// await waits for b when err is nil.
func (s *Store) await(b *batch, err error) error {
	if err != nil {
		return err
	}
	return b.wait()
}

// Delete removes a conversation; its items go with it unless a fork holds
// them.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	_, err := s.live(id)
	var b *batch
	if err == nil {
		b, err = s.write(&event{Op: opDelete, Conv: id}, 0)
	}
	s.mu.Unlock()
	return s.await(b, err)
}

// Append adds items at a conversation's end and returns them as stored;
// they are durable when it returns. An item given with the id of a stored
// item (another conversation's, say: an answer echoed back) and the same
// type and data is shared, not stored again; with other content, or
// already in this conversation, it is refused.
func (s *Store) Append(id string, items []Item) ([]Item, error) {
	now := s.now()
	items, err := prepareItems(items, s.opt.MaxItemBytes, now)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	c, err := s.live(id)
	if err == nil {
		err = s.checkLen(id, len(c.items)+len(items))
	}
	var recs []itemRec
	var growth int64
	if err == nil {
		recs, items, growth, err = s.records(items)
	}
	var b *batch
	if err == nil {
		b, err = s.write(&event{Op: opAppend, Conv: id, At: now, Items: recs}, growth)
	}
	s.mu.Unlock()
	if err := s.await(b, err); err != nil {
		return nil, err
	}
	return items, nil
}

// MaxPage is the largest page Items returns (OpenAI's limit).
const MaxPage = 100

// Items is a page of a conversation's items as OpenAI lists them: up to
// limit (1..MaxPage) items after the item `after` ("" = from the start) in
// ascending order, or before it going back when desc; hasMore says
// whether items remain past the page.
func (s *Store) Items(id string, after string, limit int, desc bool) (items []Item, hasMore bool, err error) {
	if limit < 1 || limit > MaxPage {
		return nil, false, fmt.Errorf("session: limit %d: %w (1..%d)", limit, ErrInvalid, MaxPage)
	}
	if after != "" {
		if err := checkID("after", after); err != nil {
			return nil, false, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.live(id)
	if err != nil {
		return nil, false, err
	}
	n := len(c.items)
	at := func(i int) *item { // the i-th item in the listing's order
		if desc {
			return c.items[n-1-i]
		}
		return c.items[i]
	}
	start := 0
	if after != "" {
		k, err := c.find(after)
		if err != nil {
			return nil, false, err
		}
		start = k + 1
		if desc {
			start = n - k
		}
	}
	end := min(start+limit, n)
	for i := start; i < end; i++ {
		items = append(items, at(i).Item)
	}
	return items, end < n, nil
}

// Item returns one item of a conversation.
func (s *Store) Item(id, itemID string) (Item, error) {
	if err := checkID("item", itemID); err != nil {
		return Item{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.live(id)
	if err != nil {
		return Item{}, err
	}
	i, err := c.find(itemID)
	if err != nil {
		return Item{}, err
	}
	return c.items[i].Item, nil
}

// DeleteItem removes one item from a conversation (a fork sharing it
// keeps it).
func (s *Store) DeleteItem(id, itemID string) error {
	if err := checkID("item", itemID); err != nil {
		return err
	}
	s.mu.Lock()
	_, err := s.live(id)
	var b *batch
	if err == nil {
		b, err = s.write(&event{Op: opDeleteItem, Conv: id, At: s.now(), Item: itemID}, 0)
	}
	s.mu.Unlock()
	return s.await(b, err)
}

// Fork makes a conversation holding id's items up to and including
// atItemID ("" = all of them), with its own metadata. The items are
// shared, not copied: the record names the source and the item.
func (s *Store) Fork(id, atItemID string, meta map[string]string) (Conversation, error) {
	if atItemID != "" {
		if err := checkID("item", atItemID); err != nil {
			return Conversation{}, err
		}
	}
	if err := checkMetadata(meta); err != nil {
		return Conversation{}, err
	}
	s.mu.Lock()
	src, err := s.live(id)
	n := 0
	if err == nil {
		n = len(src.items)
		if atItemID != "" {
			var i int
			i, err = src.find(atItemID)
			n = i + 1
		}
	}
	if err == nil {
		err = s.checkConvQuota()
	}
	forkID := newID("conv_")
	var b *batch
	var h Conversation
	if err == nil {
		growth := convCost(forkID, meta) + int64(n)*refCost(forkID) // item ids are about as long
		b, err = s.write(&event{Op: opFork, Conv: forkID, From: id, Item: atItemID, At: s.now(), Meta: meta}, growth)
	}
	if err == nil {
		h = s.st.convs[forkID].header()
	}
	s.mu.Unlock()
	return h, s.await(b, err)
}

// TrimFront drops a conversation's first n items (all of them when n is
// past its length).
func (s *Store) TrimFront(id string, n int) error {
	if n < 0 {
		return fmt.Errorf("session: trim %d items: %w", n, ErrInvalid)
	}
	s.mu.Lock()
	_, err := s.live(id)
	var b *batch
	if err == nil {
		b, err = s.write(&event{Op: opTrimFront, Conv: id, At: s.now(), N: n}, 0)
	}
	s.mu.Unlock()
	return s.await(b, err)
}

// TrimAfter drops every item after itemID.
func (s *Store) TrimAfter(id, itemID string) error {
	if err := checkID("item", itemID); err != nil {
		return err
	}
	s.mu.Lock()
	_, err := s.live(id)
	var b *batch
	if err == nil {
		b, err = s.write(&event{Op: opTrimAfter, Conv: id, At: s.now(), Item: itemID}, 0)
	}
	s.mu.Unlock()
	return s.await(b, err)
}

// All returns every item of a conversation in order (to build a prompt).
func (s *Store) All(id string) ([]Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.live(id)
	if err != nil {
		return nil, err
	}
	out := make([]Item, len(c.items))
	for i, it := range c.items {
		out[i] = it.Item
	}
	return out, nil
}

// SetPin records a pin, replacing one of its key.
func (s *Store) SetPin(p Pin) error {
	if err := checkPin(p, s.opt.MaxPinTokens); err != nil {
		return err
	}
	s.mu.Lock()
	var err error
	if !p.Expires.After(s.opt.Now()) {
		err = fmt.Errorf("session: pin %q: %w: expires in the past", clip(p.Key), ErrInvalid)
	}
	if _, replaces := s.st.pins[p.Key]; err == nil && !replaces && s.opt.MaxPins > 0 && len(s.st.pins) >= s.opt.MaxPins {
		s.dropExpired(true)
		if len(s.st.pins) >= s.opt.MaxPins {
			err = fmt.Errorf("session: pin %q: %w: %d pins, at most %d", clip(p.Key), ErrQuota, len(s.st.pins), s.opt.MaxPins)
		}
	}
	var b *batch
	if err == nil {
		rec := &pinRec{Key: p.Key, Model: p.Model, Tokens: slices.Clone(p.Tokens), Expires: p.Expires.UnixNano()}
		b, err = s.write(&event{Op: opPin, Pin: rec}, pinCost(&p))
	}
	s.mu.Unlock()
	return s.await(b, err)
}

// DropPin removes a pin.
func (s *Store) DropPin(key string) error {
	s.mu.Lock()
	var err error
	if _, ok := s.st.pins[key]; !ok {
		err = fmt.Errorf("session: pin %q: %w", clip(key), ErrNotFound)
	}
	var b *batch
	if err == nil {
		b, err = s.write(&event{Op: opUnpin, Key: key}, 0)
	}
	s.mu.Unlock()
	return s.await(b, err)
}

// Pins returns the unexpired pins, by key.
func (s *Store) Pins() []Pin {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	var out []Pin
	for _, p := range s.st.pins {
		if p.Expires.After(now) {
			p.Tokens = slices.Clone(p.Tokens)
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Pin) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return out
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
