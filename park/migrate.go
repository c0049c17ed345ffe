package park

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"superfluid/flock"
)

// Earlier builds parked every model in the park directory itself (the
// flat layout) and removed at start-up every file written for another
// model or KV type, so two models sharing the default directory deleted
// each other's conversations. Now each identity parks in its own
// subdirectory, and Open moves the current identity's flat files into it;
// every other file in the flat layout stays where it is, for the model
// (or the older build) that can read it.
//
// A flat file of format version 1 does not say its V layout. Its layout
// is read from the first bytes of its payload (decoded up to the v_trans
// word of llama.cpp's state, at most one shuffle block past it), and only
// a file of this store's layout is moved: its header is rewritten in
// place as version 2 — the same length, so the payload stays where it is
// and its checksum still holds — then the file is renamed into the
// subdirectory. The payload is verified in full when it is restored, as
// every file's is.

// migrate moves this identity's flat-layout files into its subdirectory.
// It holds the park directory's own lock meanwhile: an older build
// serving from the flat layout holds it all along, and then nothing is
// moved until a later start.
func (s *Store) migrate() {
	root := s.cfg.Dir
	lock, err := flock.Dir(root)
	if err != nil {
		s.log.Info("park: the park directory's flat layout is in use (an older build, or another server starting); its files are left for a later start", "dir", root, "err", err)
		return
	}
	defer lock.Close()
	ents, err := os.ReadDir(root)
	if err != nil {
		s.log.Warn("park: cannot list the park directory; nothing migrated", "dir", root, "err", err)
		return
	}
	moved := false
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.Contains(name, ".park.tmp") && e.Type().IsRegular():
			// An older build's interrupted write: it held the lock while
			// it wrote, so none is writing now.
			if err := os.Remove(filepath.Join(root, name)); err == nil {
				s.stats.StaleTemps.Add(1)
			}
		case isName(name) && e.Type().IsRegular():
			ok, err := s.migrateFile(name)
			switch {
			case err != nil:
				s.log.Warn("park: cannot move a park file of the flat layout into its subdirectory; leaving it", "file", name, "err", err)
				s.stats.Foreign.Add(1)
			case ok:
				s.stats.Migrated.Add(1)
				moved = true
			default:
				s.stats.Foreign.Add(1)
			}
		}
	}
	if moved {
		if err := errors.Join(syncDir(s.dir), syncDir(root)); err != nil {
			s.log.Warn("park: syncing the migrated files' directories", "err", err)
		}
	}
	if n := s.stats.Foreign.Load(); n > 0 {
		s.log.Info("park: files of other models, KV types or V layouts left in the park directory's flat layout", "dir", root, "files", n)
	}
}

// migrateFile moves one flat-layout file into the subdirectory if it is
// this identity's, and reports whether it did. A file it cannot read, or
// of another identity, is left alone: not this store's to judge.
func (s *Store) migrateFile(name string) (bool, error) {
	path := filepath.Join(s.cfg.Dir, name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	h, err := readHeader(bufio.NewReaderSize(f, 64<<10), st.Size())
	if err != nil || h.Model != s.model || h.CacheTypes() != s.cfg.CacheTypes() || hex.EncodeToString(h.TokenDigest[:])+".park" != name {
		return false, nil
	}
	switch h.Version {
	case formatVersion, spacelessVersion: // moved by a start that stopped before the rename
		if h.VLayout != s.cfg.VLayout {
			return false, nil
		}
	case legacyVersion:
		l, err := payloadVLayout(io.NewSectionReader(f, h.Len(), int64(h.PayloadLen)), h)
		if err != nil {
			return false, fmt.Errorf("reading its V layout: %w", err)
		}
		if l != s.cfg.VLayout {
			return false, nil
		}
		h.VLayout = l
		hdr := appendHeader(nil, h)
		if int64(len(hdr)) != h.Len() {
			return false, fmt.Errorf("the version %d header is %d bytes, the old one %d", formatVersion, len(hdr), h.Len())
		}
		if _, err := f.WriteAt(hdr, 0); err != nil {
			return false, err
		}
		if err := f.Sync(); err != nil {
			return false, err
		}
	default:
		return false, nil
	}
	dst := filepath.Join(s.dir, name)
	if _, err := os.Stat(dst); err == nil {
		// The subdirectory has the same tokens' file, written since.
		return true, os.Remove(path)
	}
	return true, os.Rename(path, dst)
}

// payloadVLayout decodes the start of a payload until the state's V
// layout can be read. A lossy payload keeps the state's cell list as it
// is; a shuffled one is decoded whole shuffle blocks at a time.
func payloadVLayout(r io.Reader, h *Header) (VLayout, error) {
	d, err := zstd.NewReader(bufio.NewReaderSize(r, 64<<10), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	shuffled := h.Flags&FlagShuffle != 0
	step := 64 << 10
	if shuffled {
		step = shuffleBlock
	}
	var prefix, buf []byte
	for read := uint64(0); read < h.RawLen; {
		n := int(min(uint64(step), h.RawLen-read))
		buf = grow(buf, n)[:n]
		k, err := io.ReadFull(d, buf)
		read += uint64(k)
		if shuffled && k < n {
			return 0, fmt.Errorf("zstd: a shuffle block of %d bytes decodes to %d: %v", n, k, err)
		}
		if shuffled {
			prefix = unshuffle2(prefix, buf[:k])
		} else {
			prefix = append(prefix, buf[:k]...)
		}
		l, perr := stateVLayout(prefix)
		if !errors.Is(perr, errShort) {
			return l, perr
		}
		if err != nil {
			return 0, fmt.Errorf("zstd: %w", err)
		}
	}
	return 0, errors.New("the state ends before its V layout")
}
