package park

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// Compression, chosen by measurement on exported KV state of the 0.5B
// synthetic model (2,000 tokens; e2e BenchmarkPark and BenchmarkCodec):
//
//   - f16 KV data has no repeated byte strings for LZ matching to find:
//     every level's gain comes from entropy-coding the literals, and the
//     high byte of each f16 (sign, exponent) carries ~5.5 of 8 bits while
//     the low byte is noise. klauspost's faster levels skip entropy coding
//     of literals unless told (WithAllLitEntropyCompression), and then
//     store the data raw: ratio 0.999 at SpeedFastest and SpeedDefault.
//     With it, SpeedFastest reaches what SpeedBetterCompression does
//     (0.919) at a fraction of the time.
//   - Splitting the data into 2-byte planes first (every field of the
//     exported state is 2-byte aligned, so the planes are exactly the f16
//     low and high bytes) puts the compressible bytes together: 0.846,
//     the order-0 entropy bound of the high bytes. Planes are split per
//     block of shuffleBlock bytes so that a restore can decode and
//     reassemble as it reads, into the one buffer the engine imports from.
//     f16 caches only; q8_0 data is incompressible either way (0.999).
//   - Concurrency 1: one writer goroutine compresses one file at a time,
//     so parking takes at most one of the cores the engine's threads share.
//   - A 1 MiB window: with no matches to find a larger one gains nothing,
//     and the decoder's history buffer is the window's size.
const (
	level        = zstd.SpeedFastest
	window       = 1 << 20
	shuffleBlock = 1 << 20
	// maxWindow bounds what a frame may ask the decoder to allocate.
	maxWindow = 8 << 20
)

func newEncoder() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1),
		zstd.WithAllLitEntropyCompression(true), zstd.WithEncoderCRC(false), zstd.WithWindowSize(window))
	if err != nil {
		panic("park: zstd encoder: " + err.Error())
	}
	return e
}

func newDecoder() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		panic("park: zstd decoder: " + err.Error())
	}
	return d
}

// payloadEncoder compresses on the writer goroutine, reusing its buffers.
type payloadEncoder struct {
	enc     *zstd.Encoder
	out     bytes.Buffer
	scratch []byte
}

// encode compresses src (shuffled per block when flags say so) and returns
// the payload, valid until the next call.
func (p *payloadEncoder) encode(src []byte, flags uint8) []byte {
	if p.enc == nil {
		p.enc = newEncoder()
	}
	p.out.Reset()
	p.enc.ResetContentSize(&p.out, int64(len(src)))
	for len(src) > 0 {
		blk := src
		if flags&FlagShuffle != 0 {
			blk = src[:min(len(src), shuffleBlock)]
			p.scratch = shuffle2(p.scratch[:0], blk)
			p.enc.Write(p.scratch)
		} else {
			p.enc.Write(blk)
		}
		src = src[len(blk):]
	}
	p.enc.Close() // writes to a bytes.Buffer: no error
	return p.out.Bytes()
}

// payloadDecoder verifies and decompresses on the owner's goroutine.
type payloadDecoder struct {
	dec     *zstd.Decoder
	scratch []byte
	crc     crcReader
}

// decode reads a payload of h.PayloadLen bytes from r, decompresses it into
// dst (reused when large enough) and undoes the shuffle or demotion the
// flags name, checking the payload's CRC over every byte. Damage is a
// payload refusal whatever it broke first.
func (p *payloadDecoder) decode(dst []byte, h *Header, r io.Reader) ([]byte, error) {
	if p.dec == nil {
		p.dec = newDecoder()
	}
	// The raw length is trusted only this far before the checksum has
	// been seen: f16 state never compresses 256 times.
	if h.RawLen > 256*h.PayloadLen+1<<16 {
		return nil, refuse(ReasonHeader, "raw length %d for a %d-byte payload", h.RawLen, h.PayloadLen)
	}
	p.crc = crcReader{r: bufio.NewReaderSize(io.LimitReader(r, int64(h.PayloadLen)), 256<<10)}
	out, err := p.decompress(dst, h)
	// Whatever the decoder left unread still counts for the checksum.
	if _, cerr := io.Copy(io.Discard, &p.crc); cerr != nil && err == nil {
		err = refuse(ReasonTruncated, "reading the payload: %v", cerr)
	}
	if p.crc.n != h.PayloadLen {
		return nil, refuse(ReasonTruncated, "payload of %d bytes, %d read", h.PayloadLen, p.crc.n)
	}
	if p.crc.sum != h.PayloadCRC {
		return nil, refuse(ReasonPayload, "payload checksum mismatch")
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (p *payloadDecoder) decompress(dst []byte, h *Header) ([]byte, error) {
	if err := p.dec.Reset(&p.crc); err != nil {
		return nil, refuse(ReasonDecode, "zstd: %v", err)
	}
	raw := int(h.RawLen)
	switch {
	case h.Flags&FlagLossy != 0:
		// The demoted form is smaller than the raw one; the walker checks
		// its structure while promoting.
		d, err := readAtMost(grow(p.scratch, raw*17/32+1<<16)[:0], p.dec, raw)
		p.scratch = d
		if err != nil {
			return nil, err
		}
		out, err := promote(grow(dst, raw)[:0], d)
		if err != nil {
			return nil, refuse(ReasonDecode, "lossy payload: %v", err)
		}
		if len(out) != raw {
			return nil, refuse(ReasonDecode, "promoted to %d bytes, the header says %d", len(out), raw)
		}
		return out, expectEOF(p.dec)
	case h.Flags&FlagShuffle != 0:
		out := grow(dst, raw)[:0]
		p.scratch = grow(p.scratch, shuffleBlock)
		for len(out) < raw {
			blk := p.scratch[:min(shuffleBlock, raw-len(out))]
			if _, err := io.ReadFull(p.dec, blk); err != nil {
				return nil, refuse(ReasonDecode, "zstd: %v", err)
			}
			out = unshuffle2(out, blk)
		}
		return out, expectEOF(p.dec)
	default:
		out := grow(dst, raw)[:raw]
		if _, err := io.ReadFull(p.dec, out); err != nil {
			return nil, refuse(ReasonDecode, "zstd: %v", err)
		}
		return out, expectEOF(p.dec)
	}
}

// readAtMost reads r to its end into dst, refusing more than most bytes.
func readAtMost(dst []byte, r io.Reader, most int) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	n, err := io.Copy(buf, io.LimitReader(r, int64(most)+1))
	if err != nil {
		return buf.Bytes(), refuse(ReasonDecode, "zstd: %v", err)
	}
	if n > int64(most) {
		return buf.Bytes(), refuse(ReasonDecode, "the payload decodes past %d bytes", most)
	}
	return buf.Bytes(), nil
}

func expectEOF(r io.Reader) error {
	var one [1]byte
	switch n, err := r.Read(one[:]); {
	case n > 0:
		return refuse(ReasonDecode, "the payload decodes past its raw length")
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return expectEOF(r)
	default:
		return refuse(ReasonDecode, "zstd: %v", err)
	}
}

// crcReader checksums (CRC-32C) and counts what is read through it.
type crcReader struct {
	r   io.Reader
	sum uint32
	n   uint64
}

func (c *crcReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.sum = crc32.Update(c.sum, castagnoli, b[:n])
	c.n += uint64(n)
	return n, err
}

// grow returns b with capacity for at least n bytes.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b
	}
	return make([]byte, 0, n)
}

// shuffle2 appends src's even bytes, then its odd bytes, then a trailing
// odd byte, to dst. Sixteen bytes at a time: it runs on every park and
// restore of an f16 cache, over tens of megabytes.
func shuffle2(dst, src []byte) []byte {
	h := len(src) / 2
	start := len(dst)
	dst = slices.Grow(dst, len(src))[:start+len(src)]
	lo, hi := dst[start:start+h], dst[start+h:start+2*h]
	i := 0
	for ; i+8 <= h; i += 8 {
		a := binary.LittleEndian.Uint64(src[2*i:])
		b := binary.LittleEndian.Uint64(src[2*i+8:])
		binary.LittleEndian.PutUint64(lo[i:], uint64(pack4(a))|uint64(pack4(b))<<32)
		binary.LittleEndian.PutUint64(hi[i:], uint64(pack4(a>>8))|uint64(pack4(b>>8))<<32)
	}
	for ; i < h; i++ {
		lo[i] = src[2*i]
		hi[i] = src[2*i+1]
	}
	if len(src)%2 == 1 {
		dst[start+2*h] = src[len(src)-1]
	}
	return dst
}

// unshuffle2 undoes shuffle2, appending to dst.
func unshuffle2(dst, src []byte) []byte {
	h := len(src) / 2
	start := len(dst)
	dst = slices.Grow(dst, len(src))[:start+len(src)]
	out := dst[start:]
	lo, hi := src[:h], src[h:2*h]
	i := 0
	for ; i+8 <= h; i += 8 {
		l := binary.LittleEndian.Uint64(lo[i:])
		u := binary.LittleEndian.Uint64(hi[i:])
		binary.LittleEndian.PutUint64(out[2*i:], spread4(uint32(l))|spread4(uint32(u))<<8)
		binary.LittleEndian.PutUint64(out[2*i+8:], spread4(uint32(l>>32))|spread4(uint32(u>>32))<<8)
	}
	for ; i < h; i++ {
		out[2*i] = lo[i]
		out[2*i+1] = hi[i]
	}
	if len(src)%2 == 1 {
		out[2*h] = src[len(src)-1]
	}
	return dst
}

// pack4 gathers bytes 0, 2, 4 and 6 of x into a uint32.
func pack4(x uint64) uint32 {
	x &= 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return uint32(x | x>>16)
}

// spread4 puts the bytes of x at bytes 0, 2, 4 and 6 of a uint64.
func spread4(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000ffff0000ffff
	return (v | v<<8) & 0x00ff00ff00ff00ff
}

var errShort = errors.New("short")

func shortf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errShort}, args...)...)
}
