package park

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// Lossy parking demotes the f16 K and V data of an exported sequence to 8
// bits (blocks of 32 values sharing an f16 scale, as ggml's q8_0) — 34
// bytes where there were 64 — and promotes it back to f16 at restore. The
// restored cache then differs from the one parked by up to half a
// quantization step per value, so outputs may differ: it is done only when
// asked (--park-lossy), recorded in each file's header, and reported.
//
// It needs to know where the f16 data is, which means reading the layout
// of the exported blob: the engine's header (native/seq.cpp, sf_state_header)
// and after it llama.cpp's sequence state (llama_kv_cache::state_write in
// the pinned llama.cpp): stream count; per stream a cell count, per cell a
// position and its sequence ids, then v_trans and the layer count, per
// layer the K type, row size and rows, then per layer the V type and either
// its row size and rows or (transposed V) element size, GQA width and
// elements. That layout is llama.cpp's, not a stable API: the walker checks
// it strictly (every size accounted for, nothing left over) and a blob it
// cannot read is parked losslessly instead (counted as a lossy fallback),
// never mangled.

const (
	engineHeaderLen = 64 // sizeof(sf_state_header)
	ggmlF16         = 1  // GGML_TYPE_F16
	qBlock          = 32 // values per demoted block
	qBlockBytes     = 2 + qBlock
)

// demote appends the lossy form of an exported blob to dst. It reports
// errNotDemotable when the blob holds no f16 data (a q8_0 or q4_0 cache).
func demote(dst, blob []byte) ([]byte, error) {
	n := 0
	dst = slices.Grow(dst, len(blob)*17/32+1<<12) // f16 data shrinks to 17/32
	out, err := walk(dst, blob, func(w *walker, typ int32, size uint64) error {
		if typ != ggmlF16 {
			return w.copyN(size)
		}
		n++
		return w.demoteF16(size)
	})
	if err == nil && n == 0 {
		err = errNotDemotable
	}
	return out, err
}

var errNotDemotable = errors.New("park: the exported state holds no f16 data to demote")

// promote appends the f16 form of a demoted blob to dst and recomputes the
// engine header's checksum over it.
func promote(dst, demoted []byte) ([]byte, error) {
	start := len(dst)
	if len(demoted) >= engineHeaderLen { // the engine header still says the promoted size
		if n := binary.LittleEndian.Uint64(demoted[48:]); n <= 4*uint64(len(demoted)) {
			dst = slices.Grow(dst, engineHeaderLen+int(n))
		}
	}
	out, err := walk(dst, demoted, func(w *walker, typ int32, size uint64) error {
		if typ != ggmlF16 {
			return w.copyN(size)
		}
		return w.promoteF16(size)
	})
	if err != nil {
		return nil, err
	}
	body := out[start+engineHeaderLen:]
	binary.LittleEndian.PutUint64(out[start+48:], uint64(len(body)))
	binary.LittleEndian.PutUint64(out[start+56:], engineChecksum(engineVersion(out[start:]), body))
	return out, nil
}

// A current upstream llama.cpp starts a sequence's state with a magic word
// and the sequence id it was exported from (llama_context::state_seq_get_data);
// the Go module's llama.cpp writes the memory's state directly.
const llamaSeqMagic = 0xaf143cd8

// llamaSeqPrefixLen is how many bytes of llama.cpp's sequence state come
// before the memory's own state: 8 (magic, sequence id) after upstream's
// magic, else 0.
func llamaSeqPrefixLen(state []byte) int {
	if len(state) >= 8 && binary.LittleEndian.Uint32(state) == llamaSeqMagic {
		return 8
	}
	return 0
}

// Engine state versions (native/seq.cpp): version 2 changed only the
// checksum, and blobs of version 1 parked before are still read.
const (
	engineVersionFNV   = 1
	engineVersionBlock = 2
)

// engineVersion is an exported blob's engine state version, 0 when the
// blob is not one this build reads.
func engineVersion(blob []byte) uint32 {
	if len(blob) < engineHeaderLen || string(blob[:4]) != "SFKV" {
		return 0
	}
	if v := binary.LittleEndian.Uint32(blob[4:]); v == engineVersionFNV || v == engineVersionBlock {
		return v
	}
	return 0
}

// errEngineVersion refuses a blob engineVersion does not read.
var errEngineVersion = errors.New("park: not an exported sequence of engine state version 1 or 2")

// engineChecksum is the engine header's checksum of a version's payload:
// native/seq.cpp's block_checksum (version 2) or fnv1a (version 1), which
// this must match bit for bit.
func engineChecksum(version uint32, b []byte) uint64 {
	if version == engineVersionFNV {
		return fnvChecksum(b)
	}
	return blockChecksum(b)
}

const (
	checksumBasis = 1469598103934665603 // one digit short of FNV's standard basis
	checksumPrime = 1099511628211
)

// fnvChecksum is FNV-1a's structure with the offset basis above, so
// hash/fnv does not reproduce it.
func fnvChecksum(b []byte) uint64 {
	h := uint64(checksumBasis)
	for _, x := range b {
		h = (h ^ uint64(x)) * checksumPrime
	}
	return h
}

// blockChecksum is FNV-1a's xor-and-multiply on four lanes of
// little-endian words in turn, each rotated left by 29, the tail after the
// last 32-byte block byte by byte on lane 0, then the length and lanes
// folded the same way (see native/seq.cpp for why).
func blockChecksum(b []byte) uint64 {
	lane := [4]uint64{checksumBasis, checksumBasis ^ 1, checksumBasis ^ 2, checksumBasis ^ 3}
	n := len(b)
	for len(b) >= 32 {
		for l := range lane {
			lane[l] = bits.RotateLeft64((lane[l]^binary.LittleEndian.Uint64(b[8*l:]))*checksumPrime, 29)
		}
		b = b[32:]
	}
	for _, x := range b {
		lane[0] = (lane[0] ^ uint64(x)) * checksumPrime
	}
	h := uint64(n)
	for _, v := range lane {
		h = bits.RotateLeft64((h^v)*checksumPrime, 29)
	}
	return h
}

// walker copies an exported blob field by field, handing each tensor data
// region to a callback that consumes it from in and writes out.
type walker struct {
	in  []byte
	out []byte
}

func walk(dst, blob []byte, region func(w *walker, typ int32, size uint64) error) ([]byte, error) {
	if engineVersion(blob) == 0 {
		return nil, errEngineVersion
	}
	n := engineHeaderLen + llamaSeqPrefixLen(blob[engineHeaderLen:])
	w := &walker{in: blob[n:], out: append(dst, blob[:n]...)}
	nStream, err := w.u32()
	if err != nil {
		return nil, err
	}
	if nStream > 1<<16 {
		return nil, fmt.Errorf("park: %d streams", nStream)
	}
	for range nStream {
		if err := w.stream(region); err != nil {
			return nil, err
		}
	}
	if len(w.in) != 0 {
		return nil, fmt.Errorf("park: %d bytes left after the sequence state", len(w.in))
	}
	return w.out, nil
}

func (w *walker) stream(region func(w *walker, typ int32, size uint64) error) error {
	cells, err := w.u32()
	if err != nil || cells == 0 {
		return err
	}
	for range cells {
		if _, err := w.u32(); err != nil { // position
			return err
		}
		ids, err := w.u32()
		if err != nil {
			return err
		}
		if err := w.copyN(4 * uint64(ids)); err != nil {
			return err
		}
	}
	vTrans, err := w.u32()
	if err != nil {
		return err
	}
	layers, err := w.u32()
	if err != nil {
		return err
	}
	if vTrans > 1 || layers > 1<<12 {
		return fmt.Errorf("park: v_trans %d, %d layers", vTrans, layers)
	}
	for range layers { // K: type, row size, rows
		typ, err := w.u32()
		if err != nil {
			return err
		}
		row, err := w.u64()
		if err != nil {
			return err
		}
		if err := w.tensor(region, int32(typ), row, uint64(cells)); err != nil {
			return err
		}
	}
	for range layers { // V
		typ, err := w.u32()
		if err != nil {
			return err
		}
		if vTrans == 0 {
			row, err := w.u64()
			if err != nil {
				return err
			}
			if err := w.tensor(region, int32(typ), row, uint64(cells)); err != nil {
				return err
			}
			continue
		}
		el, err := w.u32()
		if err != nil {
			return err
		}
		width, err := w.u32()
		if err != nil {
			return err
		}
		if err := w.tensor(region, int32(typ), uint64(el), uint64(width)*uint64(cells)); err != nil {
			return err
		}
	}
	return nil
}

// tensor hands a data region of count items of unit bytes to region,
// after checking its size cannot overflow and is whole f16 values.
func (w *walker) tensor(region func(w *walker, typ int32, size uint64) error, typ int32, unit, count uint64) error {
	if unit > 1<<32 || count > 1<<40 || unit*count > 1<<40 {
		return fmt.Errorf("park: tensor of %d × %d bytes", count, unit)
	}
	size := unit * count
	if typ == ggmlF16 && size%2 != 0 {
		return fmt.Errorf("park: f16 tensor of %d bytes", size)
	}
	return region(w, typ, size)
}

func (w *walker) u32() (uint32, error) {
	if len(w.in) < 4 {
		return 0, shortf("a 4-byte field")
	}
	v := binary.LittleEndian.Uint32(w.in)
	w.out = append(w.out, w.in[:4]...)
	w.in = w.in[4:]
	return v, nil
}

func (w *walker) u64() (uint64, error) {
	if len(w.in) < 8 {
		return 0, shortf("an 8-byte field")
	}
	v := binary.LittleEndian.Uint64(w.in)
	w.out = append(w.out, w.in[:8]...)
	w.in = w.in[8:]
	return v, nil
}

func (w *walker) copyN(n uint64) error {
	if uint64(len(w.in)) < n {
		return shortf("%d bytes of %d", len(w.in), n)
	}
	w.out = append(w.out, w.in[:n]...)
	w.in = w.in[n:]
	return nil
}

// A demoted region starts with a mode byte: 1, blocks of an f16 scale and
// 32 int8 values (the last block padded with zeros); 0, the f16 values
// verbatim, used when a block holds an infinity or NaN that a scale cannot
// carry.
func demotedLen(values uint64) uint64 { return 1 + (values+qBlock-1)/qBlock*qBlockBytes }

func (w *walker) demoteF16(size uint64) error {
	if uint64(len(w.in)) < size {
		return shortf("f16 tensor of %d bytes, %d left", size, len(w.in))
	}
	src := w.in[:size]
	for i := 0; i+1 < len(src); i += 2 {
		if binary.LittleEndian.Uint16(src[i:])&0x7c00 == 0x7c00 {
			w.out = append(w.out, 0)
			return w.copyN(size)
		}
	}
	values := int(size / 2)
	start := len(w.out)
	n := int(demotedLen(uint64(values)))
	w.out = slices.Grow(w.out, n)[:start+n]
	out := w.out[start:]
	out[0] = 1
	out = out[1:]
	table := halfTable()
	for b := 0; b < values; b += qBlock {
		var vals [qBlock]float32
		m := min(qBlock, values-b)
		amax := float32(0)
		for j := range m {
			v := table[binary.LittleEndian.Uint16(src[2*(b+j):])]
			vals[j] = v
			amax = max(amax, v, -v)
		}
		blk := out[b/qBlock*qBlockBytes:][:qBlockBytes]
		dh := floatToHalf(amax / 127)
		binary.LittleEndian.PutUint16(blk, dh)
		inv := float32(0)
		if d := table[dh]; d != 0 {
			inv = 1 / d
		}
		for j := range qBlock {
			q := vals[j] * inv // |q| ≤ 127 (+ rounding of the scale)
			r := int32(q + 0.5)
			if q < 0 {
				r = int32(q - 0.5)
			}
			blk[2+j] = byte(int8(max(-127, min(127, r))))
		}
	}
	w.in = w.in[size:]
	return nil
}

func (w *walker) promoteF16(size uint64) error {
	if len(w.in) < 1 {
		return shortf("a demoted region's mode")
	}
	mode := w.in[0]
	w.in = w.in[1:]
	switch mode {
	case 0:
		return w.copyN(size)
	case 1:
	default:
		return fmt.Errorf("park: demoted region mode %d", mode)
	}
	values := int(size / 2)
	need := int(demotedLen(uint64(values)) - 1)
	if len(w.in) < need {
		return shortf("demoted tensor of %d bytes, %d left", need, len(w.in))
	}
	src := w.in[:need]
	start := len(w.out)
	w.out = slices.Grow(w.out, int(size))[:start+int(size)]
	out := w.out[start:]
	table := halfTable()
	for b := 0; b < values; b += qBlock {
		blk := src[b/qBlock*qBlockBytes:][:qBlockBytes]
		d := table[binary.LittleEndian.Uint16(blk)]
		m := min(qBlock, values-b)
		for j := range m {
			binary.LittleEndian.PutUint16(out[2*(b+j):], floatToHalf(float32(int8(blk[2+j]))*d))
		}
	}
	w.in = w.in[need:]
	return nil
}

var (
	halfOnce sync.Once
	halfTab  *[1 << 16]float32
)

// halfTable maps every binary16 value to its float32: 256 KB, built once,
// a load instead of a branchy conversion per value.
func halfTable() *[1 << 16]float32 {
	halfOnce.Do(func() {
		halfTab = new([1 << 16]float32)
		for h := range halfTab {
			halfTab[h] = halfToFloat(uint16(h))
		}
	})
	return halfTab
}

// halfToFloat converts an IEEE 754 binary16 value.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalize
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// floatToHalf converts to binary16, rounding to nearest even (F. Giesen's
// float_to_half_fast3_rtne: one branch for the common, normal case).
func floatToHalf(f float32) uint16 {
	const (
		f32Inf      = 255 << 23
		f16Max      = (127 + 16) << 23 // the first float too large for a half
		denormMagic = ((127 - 15) + (23 - 10) + 1) << 23
		minNormal   = 113 << 23 // 2^-14
	)
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	x &^= 1 << 31
	switch {
	case x >= f16Max: // overflow to infinity; NaN stays NaN
		if x > f32Inf {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case x < minNormal: // subnormal or zero: let the FPU round
		v := math.Float32frombits(x) + math.Float32frombits(denormMagic)
		return sign | uint16(math.Float32bits(v)-denormMagic)
	}
	odd := (x >> 13) & 1
	x -= (127 - 15) << 23 // rebias the exponent
	x += 0xfff + odd      // round to nearest, ties to even
	return sign | uint16(x>>13)
}
