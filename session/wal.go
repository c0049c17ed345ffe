package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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

// nextRecord reads the record at b's start and returns its payload and
// its whole length, or errTorn.
func nextRecord(b []byte) (payload []byte, n int, err error) {
	if len(b) < frameLen {
		return nil, 0, fmt.Errorf("%w: %d bytes of a frame", errTorn, len(b))
	}
	size := binary.LittleEndian.Uint32(b[:4])
	if size == 0 || size > maxRecordBytes {
		return nil, 0, fmt.Errorf("%w: length %d", errTorn, size)
	}
	if uint64(len(b)-frameLen) < uint64(size) {
		return nil, 0, fmt.Errorf("%w: %d of %d payload bytes", errTorn, len(b)-frameLen, size)
	}
	payload = b[frameLen : frameLen+int(size)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:8]) {
		return nil, 0, fmt.Errorf("%w: checksum", errTorn)
	}
	return payload, frameLen + int(size), nil
}

// replay applies each record of a log's body (after its header) to s and
// returns the length of the good part; err says why it ended early (nil
// when every byte was a good record). A record that checks but does not
// decode or apply ends it too: nothing after it is applied.
func replay(body []byte, s *state) (good int, err error) {
	for good < len(body) {
		payload, n, err := nextRecord(body[good:])
		if err != nil {
			return good, err
		}
		ev, err := decodePayload(payload)
		if err != nil {
			return good, fmt.Errorf("%w: %v", errTorn, err)
		}
		if ev.Op >= opSnapItem {
			return good, fmt.Errorf("%w: %s in a log", errTorn, ev.Op)
		}
		if err := s.apply(ev); err != nil {
			return good, fmt.Errorf("%w: %s does not apply: %v", errTorn, ev.Op, err)
		}
		good += n
	}
	return good, nil
}
