package session

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// frozen is the live state as of one moment, taken under the store's lock
// and written out without it. Items are never changed once stored, so it
// shares them; only the conversations' reference lists are copied.
type frozen struct {
	gen   uint64 // the generation the snapshot begins
	items []*item
	convs []frozenConv
	pins  []Pin
}

type frozenConv struct {
	id               string
	meta             map[string]string // replaced whole by a change, never changed in place
	created, touched int64
	refs             []*item
}

// freeze drops what has expired and takes the rest; mu held.
func (s *Store) freeze() *frozen {
	s.dropExpired(false)
	v := &frozen{gen: s.gen + 1, items: make([]*item, 0, len(s.st.items)), convs: make([]frozenConv, 0, len(s.st.convs))}
	for _, it := range s.st.items {
		v.items = append(v.items, it)
	}
	for _, c := range s.st.convs {
		v.convs = append(v.convs, frozenConv{id: c.id, meta: c.meta, created: c.created, touched: c.touched, refs: slices.Clone(c.items)})
	}
	for _, p := range s.st.pins {
		v.pins = append(v.pins, p)
	}
	return v
}

func walName(gen uint64) string { return fmt.Sprintf("wal-%016x.log", gen) }

const (
	snapName    = "snapshot"
	snapTmpName = "snapshot.tmp"
)

// compact writes v as the snapshot and begins v.gen's empty log. The order
// keeps every crash recoverable: the new log exists before the snapshot
// names its generation, and the old log goes only after the rename; Open
// reads whichever snapshot the rename left and deletes the other log.
func (s *Store) compact(v *frozen) error {
	err := s.writeCompaction(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed = err
		return err
	}
	s.stats.Compactions++
	s.stats.Fsyncs += 4
	return nil
}

func (s *Store) writeCompaction(v *frozen) error {
	newLog, err := s.createLog(v.gen)
	if err != nil {
		return err
	}
	size, err := s.writeSnapshot(v)
	if err != nil {
		newLog.Close()
		os.Remove(filepath.Join(s.dir, walName(v.gen)))
		return err
	}
	old, oldGen := s.log, s.gen
	s.log, s.gen = newLog, v.gen
	s.mu.Lock()
	s.logBytes = headerLen
	s.stats.SnapshotBytes = size
	s.mu.Unlock()
	if old != nil {
		old.Close()
		// The snapshot stands: an old log left behind (removal failed) is
		// of another generation, which Open removes.
		os.Remove(filepath.Join(s.dir, walName(oldGen)))
	}
	return nil
}

// createLog makes gen's log, empty but for its header, durable.
func (s *Store) createLog(gen uint64) (*os.File, error) {
	path := filepath.Join(s.dir, walName(gen))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session: creating the log: %w", err)
	}
	if _, err := f.Write(header(logMagic, gen)); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("session: creating the log: %w", err)
	}
	return f, nil
}

// writeSnapshot writes v to a temporary file, syncs it and renames it over
// the snapshot, then syncs the directory; it returns the snapshot's size.
func (s *Store) writeSnapshot(v *frozen) (int64, error) {
	tmp := filepath.Join(s.dir, snapTmpName)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("session: writing the snapshot: %w", err)
	}
	size, err := encodeSnapshot(f, v)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, snapName))
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("session: writing the snapshot: %w", err)
	}
	return size, nil
}

// encodeSnapshot writes the header, every live item, every conversation
// (its items by reference), every pin, and the end record.
func encodeSnapshot(f *os.File, v *frozen) (int64, error) {
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	var buf []byte
	n := 0
	put := func(ev *event) error {
		payload, err := encodePayload(ev)
		if err != nil {
			return err
		}
		buf = appendRecord(buf[:0], payload)
		size += int64(len(buf))
		n++
		_, err = w.Write(buf)
		return err
	}
	if _, err := w.Write(header(snapMagic, v.gen)); err != nil {
		return 0, err
	}
	size += headerLen
	for _, it := range v.items {
		if err := put(&event{Op: opSnapItem, Items: toRecs([]Item{it.Item})}); err != nil {
			return 0, err
		}
	}
	for _, c := range v.convs {
		refs := make([]string, len(c.refs))
		for i, it := range c.refs {
			refs[i] = it.ID
		}
		if err := put(&event{Op: opSnapConv, Conv: c.id, Created: c.created, At: c.touched, Meta: c.meta, Refs: refs}); err != nil {
			return 0, err
		}
	}
	for _, p := range v.pins {
		rec := &pinRec{Key: p.Key, Model: p.Model, Tokens: p.Tokens, Expires: p.Expires.UnixNano()}
		if err := put(&event{Op: opPin, Pin: rec}); err != nil {
			return 0, err
		}
	}
	if err := put(&event{Op: opSnapEnd, N: n}); err != nil {
		return 0, err
	}
	return size, w.Flush()
}

// loadSnapshot reads a snapshot of size bytes whole: every record good
// and the end record last, or an error (a snapshot is renamed into place
// only once complete, so a bad one is damage, not a torn write, and is not
// guessed at).
func loadSnapshot(r io.Reader, size int64) (uint64, *state, error) {
	var h [headerLen]byte
	if size < headerLen {
		return 0, nil, errors.New("no header")
	}
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	gen, err := readHeader(h[:], snapMagic)
	if err != nil {
		return 0, nil, err
	}
	st := newState()
	rr := newRecordReader(r, size-headerLen)
	for n := 0; ; n++ {
		at := headerLen + rr.off
		payload, err := rr.next()
		if err == io.EOF {
			return 0, nil, fmt.Errorf("no end record after %d records", n)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("record %d at byte %d: %w", n, at, err)
		}
		ev, err := decodePayload(payload)
		if err != nil {
			return 0, nil, fmt.Errorf("record %d: %w", n, err)
		}
		if ev.Op == opSnapEnd {
			if ev.N != n || rr.left != 0 {
				return 0, nil, fmt.Errorf("end record after %d of %d records, %d bytes before the file's end", n, ev.N, rr.left)
			}
			st.unheldItems()
			return gen, st, nil
		}
		if ev.Op != opSnapItem && ev.Op != opSnapConv && ev.Op != opPin {
			return 0, nil, fmt.Errorf("record %d: %s in a snapshot", n, ev.Op)
		}
		if err := st.apply(ev); err != nil {
			return 0, nil, fmt.Errorf("record %d: %w", n, err)
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
