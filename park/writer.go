package park

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"superfluid/panics"
)

// chunk is the write size between chunkHook calls.
const chunk = 1 << 20

var errTooBig = errors.New("park: one file would exceed the budget")

// run is the writer goroutine: it takes queued writes one at a time until
// Close closes the queue.
func (s *Store) run() {
	defer close(s.done)
	for j := range s.jobs {
		s.write(j)
	}
}

func (s *Store) write(j *job) {
	start := time.Now()
	m, err := s.writeFileSafely(j)
	s.trimWriter()
	s.stats.WriteNanos.Add(int64(time.Since(start)))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, j.name)
	s.queuedBytes -= j.bytes()
	if err != nil {
		s.gone = append(s.gone, j.name)
		switch {
		case errors.Is(err, errTooBig):
			s.stats.TooBig.Add(1)
		default:
			s.stats.WriteErrors.Add(1)
			s.logWriteError(err)
		}
		return
	}
	if j.dropped {
		// Removed while queued: what was written goes too.
		if err := os.Remove(filepath.Join(s.dir, j.name)); err != nil {
			s.log.Debug("park: removing a file dropped while queued", "file", j.name, "err", err)
		}
		s.gone = append(s.gone, j.name)
		return
	}
	s.addLocked(m)
	delete(s.refused, j.name) // a fresh state replaced the file refused
	for _, name := range j.supersedes {
		if s.index[name] == nil || s.pending[name] != nil || name == j.name {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, name)); err == nil {
			s.stats.Superseded.Add(1)
		}
		s.dropLocked(name)
		s.gone = append(s.gone, name)
	}
	s.sweepLocked(j.name)
	// Counted last: a caller that sees Parks move sees the whole write done.
	if m.Lossy {
		s.stats.LossyParks.Add(1)
	}
	s.stats.BytesRaw.Add(int64(len(j.blob)))
	s.stats.BytesFile.Add(m.Bytes)
	s.stats.Parks.Add(1)
}

// writeFileSafely is writeFile, a panic in it failing this file alone (as
// a write error: counted, logged, the file not indexed) while the writer
// goes on with the queue. writeFile removes its temporary file as the
// panic unwinds; the writer's buffers are dropped, their state in doubt.
func (s *Store) writeFileSafely(j *job) (m *Meta, err error) {
	defer func() {
		if v := recover(); v != nil {
			m, err = nil, panics.Recovered(panics.ParkWriter, v, "file", j.name, "tokens", len(j.tokens))
			s.enc.out, s.wDemoted, s.wHeader = bytes.Buffer{}, nil, nil
		}
	}()
	return s.writeFile(j)
}

// keepBuffers is the most buffer capacity kept between writes or restores:
// a conversation of 8,000 tokens of a 0.5B model is 100 MB of state, and
// holding that much for the next one is not worth the memory.
const keepBuffers = 64 << 20

func (s *Store) trimWriter() {
	if s.enc.out.Cap() > keepBuffers {
		s.enc.out = bytes.Buffer{}
	}
	if cap(s.wDemoted) > keepBuffers {
		s.wDemoted = nil
	}
}

// logWriteError logs the first failed write as a warning and the rest at
// debug level: a read-only or full disk fails every write, and serving goes
// on regardless (the failures are counted).
func (s *Store) logWriteError(err error) {
	first := false
	s.warned.Do(func() { first = true })
	if first {
		s.log.Warn("park: writing a parked conversation failed; serving continues without it (later failures are counted, logged at debug level)", "err", err)
		return
	}
	s.log.Debug("park: write failed", "err", err)
}

// writeFile encodes j and writes it under its final name: to a temporary
// file in the same directory, synced, renamed, and the directory synced,
// so the final name only ever names a complete file.
func (s *Store) writeFile(j *job) (*Meta, error) {
	// The header's V layout is the store's, checked against the state
	// itself where its layout can be read: the layout the server derived
	// from its settings could be wrong (llama.cpp resolves "auto" flash
	// attention itself), and a file must never claim a layout its state
	// does not have.
	if l, err := stateVLayout(j.blob); err == nil && l != s.cfg.VLayout {
		return nil, fmt.Errorf("park: the engine exported a state with V layout %s, this store parks %s: not parked", l, s.cfg.VLayout)
	}
	h := Header{Level: uint8(level), VLayout: s.cfg.VLayout, Model: s.model, KVType: s.cfg.KVType, VType: s.cfg.VType, Tokens: j.tokens, RawLen: uint64(len(j.blob)), Set: j.set}
	src := j.blob
	if s.cfg.Lossy {
		d, err := demote(s.wDemoted[:0], j.blob)
		if err == nil && len(d) < len(j.blob) {
			s.wDemoted = d
			src = d
			h.Flags |= FlagLossy
		} else {
			s.stats.LossyFalls.Add(1)
		}
	}
	if h.Flags&FlagLossy == 0 && s.cfg.CacheTypes() == "f16" {
		h.Flags |= FlagShuffle
	}
	// The checkpoints first (encode's result lives until its next call):
	// each compressed alone, shuffled as the main payload is.
	var spaces [][]byte
	for _, cp := range j.ckpts {
		flags := h.Flags & FlagShuffle
		p := bytes.Clone(s.enc.encode(cp.Blob, flags))
		spaces = append(spaces, p)
		h.Checkpoints = append(h.Checkpoints, Space{Pos: uint32(cp.Pos), Flags: flags, RawLen: uint64(len(cp.Blob)), PayloadLen: uint64(len(p)), PayloadCRC: crc32c(p)})
	}
	payload := s.enc.encode(src, h.Flags)
	h.PayloadLen = uint64(len(payload))
	h.PayloadCRC = crc32c(payload)
	s.wHeader = appendHeader(s.wHeader[:0], &h)
	size := int64(len(s.wHeader) + len(payload))
	for _, p := range spaces {
		size += int64(len(p))
	}
	if s.cfg.Budget > 0 && size > s.cfg.Budget {
		return nil, errTooBig
	}
	final := filepath.Join(s.dir, j.name)
	f, err := os.CreateTemp(s.dir, j.name+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("park: %w", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() { // on an error or a panic, nothing half-written stays
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	err = s.writeAll(f, append([][]byte{s.wHeader, payload}, spaces...)...)
	// The sweep orders files by modification time, which restores set with
	// the fine-grained clock; set it the same way here, since the kernel
	// stamps writes with a coarser one (a few milliseconds behind).
	now := time.Now()
	if err == nil {
		err = os.Chtimes(tmp, now, now)
	}
	if err == nil {
		err = os.Rename(tmp, final)
		renamed = err == nil
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("park: %w", err)
	}
	return &Meta{Name: j.name, Tokens: j.tokens, Bytes: size, ModTime: now, Lossy: h.Lossy(), Checkpoints: h.checkpointPositions(), Set: j.set}, nil
}

func (s *Store) writeAll(f *os.File, parts ...[]byte) error {
	for _, p := range parts {
		for len(p) > 0 {
			n := min(len(p), chunk)
			if _, err := f.Write(p[:n]); err != nil {
				f.Close()
				return err
			}
			p = p[n:]
			if s.chunkHook != nil {
				s.chunkHook()
			}
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
