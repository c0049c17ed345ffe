package session

import (
	"fmt"
)

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
	id := newID("conv_")
	var c Conversation
	err = s.change(func() (*event, int64, error) {
		if err := s.checkConvQuota(); err != nil {
			return nil, 0, err
		}
		if err := s.checkLen(id, len(items)); err != nil {
			return nil, 0, err
		}
		recs, stored, growth, err := s.records(items)
		items = stored
		return &event{Op: opCreate, Conv: id, At: now, Meta: meta, Items: recs}, convCost(id, meta) + growth, err
	}, func() { c = s.st.convs[id].header() })
	if err != nil {
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
	var h Conversation
	err := s.change(func() (*event, int64, error) {
		_, err := s.live(id)
		return &event{Op: opSetMeta, Conv: id, At: s.now(), Meta: meta}, metaCost(meta), err
	}, func() { h = s.st.convs[id].header() })
	if err != nil {
		return Conversation{}, err
	}
	return h, nil
}

// Delete removes a conversation; its items go with it unless a fork holds
// them.
func (s *Store) Delete(id string) error {
	return s.change(func() (*event, int64, error) {
		_, err := s.live(id)
		return &event{Op: opDelete, Conv: id}, 0, err
	}, nil)
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
	err = s.change(func() (*event, int64, error) {
		c, err := s.live(id)
		if err != nil {
			return nil, 0, err
		}
		if err := s.checkLen(id, len(c.items)+len(items)); err != nil {
			return nil, 0, err
		}
		recs, stored, growth, err := s.records(items)
		items = stored
		return &event{Op: opAppend, Conv: id, At: now, Items: recs}, growth, err
	}, nil)
	if err != nil {
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

// DeleteItem removes one item from a conversation (a fork sharing it
// keeps it).
func (s *Store) DeleteItem(id, itemID string) error {
	if err := checkID("item", itemID); err != nil {
		return err
	}
	return s.change(func() (*event, int64, error) {
		c, err := s.live(id)
		if err == nil {
			_, err = c.find(itemID)
		}
		return &event{Op: opDeleteItem, Conv: id, At: s.now(), Item: itemID}, 0, err
	}, nil)
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
	forkID := newID("conv_")
	var h Conversation
	err := s.change(func() (*event, int64, error) {
		src, err := s.live(id)
		if err != nil {
			return nil, 0, err
		}
		n := len(src.items)
		if atItemID != "" {
			i, err := src.find(atItemID)
			if err != nil {
				return nil, 0, err
			}
			n = i + 1
		}
		if err := s.checkConvQuota(); err != nil {
			return nil, 0, err
		}
		growth := convCost(forkID, meta) + int64(n)*refCost(forkID) // item ids are about as long
		return &event{Op: opFork, Conv: forkID, From: id, Item: atItemID, At: s.now(), Meta: meta}, growth, nil
	}, func() { h = s.st.convs[forkID].header() })
	if err != nil {
		return Conversation{}, err
	}
	return h, nil
}

// TrimFront drops a conversation's first n items (all of them when n is
// past its length).
func (s *Store) TrimFront(id string, n int) error {
	if n < 0 {
		return fmt.Errorf("session: trim %d items: %w", n, ErrInvalid)
	}
	return s.change(func() (*event, int64, error) {
		_, err := s.live(id)
		return &event{Op: opTrimFront, Conv: id, At: s.now(), N: n}, 0, err
	}, nil)
}

// TrimAfter drops every item after itemID.
func (s *Store) TrimAfter(id, itemID string) error {
	if err := checkID("item", itemID); err != nil {
		return err
	}
	return s.change(func() (*event, int64, error) {
		c, err := s.live(id)
		if err == nil {
			_, err = c.find(itemID)
		}
		return &event{Op: opTrimAfter, Conv: id, At: s.now(), Item: itemID}, 0, err
	}, nil)
}
