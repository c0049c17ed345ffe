package park

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// scan indexes the identity's subdirectory at start-up from headers
// alone: a payload is verified only when it is restored, so start-up costs
// a few kilobytes per file however large the files are. Temporary files
// are what an interrupted write left: removed. Files that fail the header
// checks are refused and counted; a damaged header or a truncated file is
// removed, a sound file of another format or identity (only a copy by
// hand puts one here) left alone.
func (s *Store) scan() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("park: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.Contains(name, ".park.tmp"):
			if err := os.Remove(filepath.Join(s.dir, name)); err == nil {
				s.stats.StaleTemps.Add(1)
			}
		case isName(name) && e.Type().IsRegular():
			m, err := s.readMeta(name)
			if err == nil {
				s.index[name] = m
				s.diskBytes += m.Bytes
				continue
			}
			if r, ok := ReasonOf(err); ok {
				s.stats.Refused[r].Add(1)
				s.refused[name] = r
				if foreign(err) {
					s.log.Warn("park: a park file of another format or identity; leaving it", "file", name, "err", err)
				} else {
					s.log.Warn("park: refused a damaged park file at start-up", "file", name, "err", err)
					os.Remove(filepath.Join(s.dir, name))
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				s.log.Warn("park: cannot read a park file; leaving it", "file", name, "err", err)
			}
		}
	}
	s.publishLocked()
	return nil
}

func (s *Store) readMeta(name string) (*Meta, error) {
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	h, err := readHeader(bufio.NewReaderSize(f, 64<<10), st.Size())
	if err != nil {
		return nil, err
	}
	if err := s.check(h, name); err != nil {
		return nil, err
	}
	return &Meta{Name: name, Tokens: h.Tokens, Bytes: st.Size(), ModTime: st.ModTime(), Lossy: h.Lossy(), Checkpoints: h.checkpointPositions(), Set: h.Set}, nil
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
