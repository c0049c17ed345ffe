package session

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// item is a stored item and the number of conversations holding it.
type item struct {
	Item
	refs int
}

type conv struct {
	id      string
	meta    map[string]string
	created int64
	touched int64 // the last write's time: retention counts from it
	items   []*item
}

// state is the store's live content. apply is the one way it changes,
// for a live write and for recovery alike; it checks the whole event
// before changing anything, so a refused event leaves no trace.
type state struct {
	convs map[string]*conv
	items map[string]*item
	pins  map[string]Pin
	bytes int64 // the live content's size as a snapshot would hold it, estimated
}

func newState() *state {
	return &state{convs: map[string]*conv{}, items: map[string]*item{}, pins: map[string]Pin{}}
}

// The size estimates behind MaxBytes: a snapshot's JSON, roughly.
func itemCost(it *Item) int64 { return int64(len(it.ID)+len(it.Type)+len(it.Data)) + 48 }
func refCost(id string) int64 { return int64(len(id)) + 4 }
func metaCost(m map[string]string) int64 {
	var n int64
	for k, v := range m {
		n += int64(len(k)+len(v)) + 6
	}
	return n
}
func convCost(id string, meta map[string]string) int64 { return int64(len(id)) + 64 + metaCost(meta) }
func pinCost(p *Pin) int64                             { return int64(len(p.Key)+len(p.Model)) + 8*int64(len(p.Tokens)) + 48 }

func (s *state) conv(id string) (*conv, error) {
	c := s.convs[id]
	if c == nil {
		return nil, fmt.Errorf("session: conversation %s: %w", id, ErrNotFound)
	}
	return c, nil
}

// index is the position of itemID in c, or -1.
func (c *conv) index(itemID string) int {
	for i, it := range c.items {
		if it.ID == itemID {
			return i
		}
	}
	return -1
}

func (c *conv) find(itemID string) (int, error) {
	i := c.index(itemID)
	if i < 0 {
		return -1, fmt.Errorf("session: item %s in conversation %s: %w", itemID, c.id, ErrNotFound)
	}
	return i, nil
}

// checkNew refuses items whose ids are already stored: an item is stored
// once, and a second with the same id would make a reference ambiguous.
func (s *state) checkNew(items []itemRec) error {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		if s.items[it.ID] != nil || seen[it.ID] {
			return fmt.Errorf("session: item %s: %w: that id is already stored", it.ID, ErrInvalid)
		}
		seen[it.ID] = true
	}
	return nil
}

// checkAdded checks the items a create or append adds to c (nil for a new
// conversation): a record with data is a new item, whose id must be new;
// one without is a reference to a stored item, which c must not hold yet.
func (s *state) checkAdded(c *conv, items []itemRec) error {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		if seen[it.ID] {
			return fmt.Errorf("session: item %s: %w: given twice", it.ID, ErrInvalid)
		}
		seen[it.ID] = true
		stored := s.items[it.ID] != nil
		switch {
		case it.Data == nil && !stored:
			return fmt.Errorf("session: item %s: %w", it.ID, ErrNotFound)
		case it.Data == nil && c != nil && c.index(it.ID) >= 0:
			return fmt.Errorf("session: item %s: %w: already in conversation %s", it.ID, ErrInvalid, c.id)
		case it.Data != nil && stored:
			return fmt.Errorf("session: item %s: %w: that id is already stored", it.ID, ErrInvalid)
		}
	}
	return nil
}

func (s *state) hold(c *conv, it *item) {
	if it.refs == 0 {
		s.bytes += itemCost(&it.Item)
	}
	it.refs++
	s.bytes += refCost(it.ID)
	c.items = append(c.items, it)
}

func (s *state) release(items []*item) {
	for _, it := range items {
		it.refs--
		s.bytes -= refCost(it.ID)
		if it.refs == 0 {
			delete(s.items, it.ID)
			s.bytes -= itemCost(&it.Item)
		}
	}
}

func (s *state) addItems(c *conv, recs []itemRec) {
	for _, r := range recs {
		it := s.items[r.ID]
		if r.Data != nil {
			it = &item{Item: r.item()}
			s.items[it.ID] = it
		}
		s.hold(c, it)
	}
}

func (s *state) addConv(id string, meta map[string]string, created int64) (*conv, error) {
	if s.convs[id] != nil {
		return nil, fmt.Errorf("session: conversation %s: %w: already exists", id, ErrInvalid)
	}
	c := &conv{id: id, meta: maps.Clone(meta), created: created, touched: created}
	if c.meta == nil {
		c.meta = map[string]string{}
	}
	s.convs[id] = c
	s.bytes += convCost(id, c.meta)
	return c, nil
}

func (s *state) dropConv(c *conv) {
	s.release(c.items)
	c.items = nil
	delete(s.convs, c.id)
	s.bytes -= convCost(c.id, c.meta)
}

// apply makes ev's change, or returns why it cannot and changes nothing.
func (s *state) apply(ev *event) error {
	switch ev.Op {
	case opCreate:
		if err := s.checkAdded(nil, ev.Items); err != nil {
			return err
		}
		c, err := s.addConv(ev.Conv, ev.Meta, ev.At)
		if err != nil {
			return err
		}
		s.addItems(c, ev.Items)
	case opAppend:
		c, err := s.conv(ev.Conv)
		if err != nil {
			return err
		}
		if err := s.checkAdded(c, ev.Items); err != nil {
			return err
		}
		s.addItems(c, ev.Items)
		c.touched = ev.At
	case opSetMeta:
		c, err := s.conv(ev.Conv)
		if err != nil {
			return err
		}
		s.bytes += metaCost(ev.Meta) - metaCost(c.meta)
		c.meta = maps.Clone(ev.Meta)
		if c.meta == nil {
			c.meta = map[string]string{}
		}
		c.touched = ev.At
	case opDelete:
		c, err := s.conv(ev.Conv)
		if err != nil {
			return err
		}
		s.dropConv(c)
	case opDeleteItem:
		c, err := s.conv(ev.Conv)
		if err != nil {
			return err
		}
		i, err := c.find(ev.Item)
		if err != nil {
			return err
		}
		s.release(c.items[i : i+1])
		c.items = slices.Delete(c.items, i, i+1)
		c.touched = ev.At
	case opFork:
		return s.fork(ev)
	case opTrimFront:
		c, err := s.conv(ev.Conv)
		if err != nil {
			return err
		}
		if ev.N < 0 {
			return fmt.Errorf("session: trim %s: %w: negative count %d", ev.Conv, ErrInvalid, ev.N)
		}
		n := min(ev.N, len(c.items))
		s.release(c.items[:n])
		c.items = append([]*item(nil), c.items[n:]...)
		c.touched = ev.At
	case opTrimAfter:
		c, err := s.conv(ev.Conv)
		if err != nil {
			return err
		}
		i, err := c.find(ev.Item)
		if err != nil {
			return err
		}
		s.release(c.items[i+1:])
		clear(c.items[i+1:]) // the array keeps no dropped item alive
		c.items = c.items[:i+1]
		c.touched = ev.At
	case opPin:
		if ev.Pin == nil {
			return fmt.Errorf("session: pin record without a pin: %w", ErrInvalid)
		}
		p := Pin{Key: ev.Pin.Key, Model: ev.Pin.Model, Tokens: ev.Pin.Tokens, Expires: time.Unix(0, ev.Pin.Expires)}
		if old, ok := s.pins[p.Key]; ok {
			s.bytes -= pinCost(&old)
		}
		s.pins[p.Key] = p
		s.bytes += pinCost(&p)
	case opUnpin:
		if _, ok := s.pins[ev.Key]; !ok {
			return fmt.Errorf("session: pin %q: %w", clip(ev.Key), ErrNotFound)
		}
		s.dropPin(ev.Key)
	case opSnapItem:
		if len(ev.Items) != 1 || ev.Items[0].Data == nil {
			return fmt.Errorf("session: snapshot item record holds %d items: %w", len(ev.Items), ErrInvalid)
		}
		if err := s.checkNew(ev.Items); err != nil {
			return err
		}
		r := ev.Items[0]
		s.items[r.ID] = &item{Item: r.item()} // held by the conversations that follow
	case opSnapConv:
		return s.snapConv(ev)
	default:
		return fmt.Errorf("session: %w record type %s", ErrInvalid, ev.Op)
	}
	return nil
}

func (s *state) fork(ev *event) error {
	src, err := s.conv(ev.From)
	if err != nil {
		return err
	}
	n := len(src.items)
	if ev.Item != "" {
		i, err := src.find(ev.Item)
		if err != nil {
			return err
		}
		n = i + 1
	}
	c, err := s.addConv(ev.Conv, ev.Meta, ev.At)
	if err != nil {
		return err
	}
	c.items = make([]*item, 0, n)
	for _, it := range src.items[:n] {
		s.hold(c, it)
	}
	src.touched = max(src.touched, ev.At)
	return nil
}

// snapConv rebuilds a conversation from a snapshot: its items were
// recorded before it, and an unknown reference makes the snapshot bad.
func (s *state) snapConv(ev *event) error {
	for _, id := range ev.Refs {
		if s.items[id] == nil {
			return fmt.Errorf("session: snapshot conversation %s holds unknown item %s: %w", ev.Conv, id, ErrInvalid)
		}
	}
	c, err := s.addConv(ev.Conv, ev.Meta, ev.Created)
	if err != nil {
		return err
	}
	c.touched = ev.At
	c.items = make([]*item, 0, len(ev.Refs))
	for _, id := range ev.Refs {
		s.hold(c, s.items[id])
	}
	return nil
}

func (s *state) dropPin(key string) {
	if p, ok := s.pins[key]; ok {
		s.bytes -= pinCost(&p)
		delete(s.pins, key)
	}
}

// unheldItems drops items no conversation holds and says how many: a
// sound snapshot leaves none, so any are counted, not kept.
func (s *state) unheldItems() int {
	n := 0
	for id, it := range s.items {
		if it.refs == 0 {
			delete(s.items, id)
			n++
		}
	}
	return n
}
