package session

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// A log or snapshot file is an 16-byte header (8 bytes of magic, the
// generation as a little-endian uint64) and then records:
//
//	length  uint32 LE  the payload's length
//	crc     uint32 LE  CRC-32C (Castagnoli) of the payload
//	payload            op byte, then the event as JSON
//
// A record is read only whole and with its checksum right; the first that
// is not ends the file's good part.
const (
	headerLen      = 16
	frameLen       = 8
	maxRecordBytes = 64 << 20
)

var (
	logMagic   = [8]byte{'S', 'F', 'S', 'E', 'S', 'W', 'A', 'L'}
	snapMagic  = [8]byte{'S', 'F', 'S', 'E', 'S', 'S', 'N', 'P'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

func header(magic [8]byte, gen uint64) []byte {
	b := make([]byte, headerLen)
	copy(b, magic[:])
	binary.LittleEndian.PutUint64(b[8:], gen)
	return b
}

// readHeader returns the generation a file's header names.
func readHeader(b []byte, magic [8]byte) (uint64, error) {
	if len(b) < headerLen || [8]byte(b[:8]) != magic {
		return 0, errors.New("session: no header")
	}
	return binary.LittleEndian.Uint64(b[8:headerLen]), nil
}

// appendRecord frames payload onto dst.
func appendRecord(dst, payload []byte) []byte {
	var f [frameLen]byte
	binary.LittleEndian.PutUint32(f[:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(f[4:], crc32.Checksum(payload, castagnoli))
	dst = append(dst, f[:]...)
	return append(dst, payload...)
}

// errTorn marks the end of a file's good part: what follows is a torn
// write or damage, never read as a record.
var errTorn = errors.New("torn or corrupt record")

// recordReader reads a file's records one at a time, holding one record
// in memory whatever the file's size.
type recordReader struct {
	r    io.Reader
	left int64 // bytes of the file not yet read
	off  int64 // bytes of good records read
	buf  []byte
}

func newRecordReader(r io.Reader, size int64) *recordReader {
	return &recordReader{r: bufio.NewReaderSize(r, 1<<20), left: size}
}

// next returns the next record's payload (valid until the next call),
// io.EOF at a clean end, or errTorn.
func (rr *recordReader) next() ([]byte, error) {
	if rr.left == 0 {
		return nil, io.EOF
	}
	if rr.left < frameLen {
		return nil, fmt.Errorf("%w: %d bytes of a frame", errTorn, rr.left)
	}
	var f [frameLen]byte
	if _, err := io.ReadFull(rr.r, f[:]); err != nil {
		return nil, fmt.Errorf("%w: reading a frame: %v", errTorn, err)
	}
	size := int64(binary.LittleEndian.Uint32(f[:4]))
	if size == 0 || size > maxRecordBytes {
		return nil, fmt.Errorf("%w: length %d", errTorn, size)
	}
	if rr.left-frameLen < size { // checked before allocating: a torn length is often huge
		return nil, fmt.Errorf("%w: %d of %d payload bytes", errTorn, rr.left-frameLen, size)
	}
	if int64(cap(rr.buf)) < size {
		rr.buf = make([]byte, size)
	}
	payload := rr.buf[:size]
	if _, err := io.ReadFull(rr.r, payload); err != nil {
		return nil, fmt.Errorf("%w: reading a payload: %v", errTorn, err)
	}
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(f[4:]) {
		return nil, fmt.Errorf("%w: checksum", errTorn)
	}
	rr.left -= frameLen + size
	rr.off += frameLen + size
	return payload, nil
}

// replay applies each record of a log's body (size bytes after its
// header) to s and returns the length of the good part; err says why it
// ended early (nil when every byte was a good record). A record that
// checks but does not decode or apply ends it too: nothing after it is
// applied.
func replay(r io.Reader, size int64, s *state) (good int64, err error) {
	rr := newRecordReader(r, size)
	for {
		payload, err := rr.next()
		if err == io.EOF {
			return rr.off, nil
		}
		if err != nil {
			return rr.off, err
		}
		ev, err := decodePayload(payload)
		if err != nil {
			return rr.off, fmt.Errorf("%w: %v", errTorn, err)
		}
		if ev.Op >= opSnapItem {
			return rr.off, fmt.Errorf("%w: %s in a log", errTorn, ev.Op)
		}
		if err := s.apply(ev); err != nil {
			return rr.off, fmt.Errorf("%w: %s does not apply: %v", errTorn, ev.Op, err)
		}
	}
}
