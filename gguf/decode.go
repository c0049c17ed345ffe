package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// decoder reads little-endian GGUF primitives, tracking the position so
// lengths can be checked against the bytes that remain.
type decoder struct {
	r    *bufio.Reader
	pos  int64
	size int64 // -1 when unknown
	buf  [8]byte
}

// left is the number of unread bytes, or MaxInt64 when the size is unknown.
func (d *decoder) left() uint64 {
	if d.size < 0 {
		return math.MaxInt64
	}
	return uint64(d.size - d.pos)
}

// fits checks that n items of at least minSize bytes each can still be in
// the input, so no allocation is ever sized beyond the input.
func (d *decoder) fits(n uint64, minSize int, what string) error {
	if minSize > 0 && n > d.left()/uint64(minSize) {
		return fmt.Errorf("%w: %s %d at offset %d needs more than the %d bytes left", ErrTruncated, what, n, d.pos, d.left())
	}
	return nil
}

func (d *decoder) full(p []byte, what string) error {
	n, err := io.ReadFull(d.r, p)
	d.pos += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: end of input at offset %d reading %s", ErrTruncated, d.pos, what)
		}
		return fmt.Errorf("reading %s at offset %d: %w", what, d.pos, err)
	}
	return nil
}

// bytes reads n bytes into a fresh slice, growing it in chunks when the
// input size is unknown.
func (d *decoder) bytes(n uint64, what string) ([]byte, error) {
	if err := d.fits(n, 1, what+" length"); err != nil {
		return nil, err
	}
	if d.size >= 0 || n <= chunk {
		p := make([]byte, n)
		return p, d.full(p, what)
	}
	var p []byte
	for uint64(len(p)) < n {
		step := min(n-uint64(len(p)), chunk)
		start := len(p)
		p = append(p, make([]byte, step)...)
		if err := d.full(p[start:], what); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (d *decoder) fixed(n int, what string) ([]byte, error) {
	b := d.buf[:n]
	return b, d.full(b, what)
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.fixed(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.fixed(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a 64-bit count of items that take at least minSize bytes each.
func (d *decoder) count(what string, minSize int) (uint64, error) {
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	return n, d.fits(n, minSize, what)
}

func (d *decoder) str(what string) (string, error) {
	n, err := d.u64(what + " length")
	if err != nil {
		return "", err
	}
	b, err := d.bytes(n, what)
	return string(b), err
}

func (d *decoder) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str("tensor name"); err != nil {
		return t, err
	}
	nDims, err := d.u32("dimension count")
	if err != nil {
		return t, err
	}
	if nDims > MaxDims {
		return t, fmt.Errorf("%w: tensor %q has %d dimensions (at most %d)", ErrCorrupt, t.Name, nDims, MaxDims)
	}
	t.Dims = make([]uint64, nDims)
	total := uint64(1)
	for i := range t.Dims {
		if t.Dims[i], err = d.u64("dimension"); err != nil {
			return t, err
		}
		if t.Dims[i] != 0 && total > math.MaxInt64/t.Dims[i] {
			return t, fmt.Errorf("%w: tensor %q dimensions %v overflow", ErrCorrupt, t.Name, t.Dims[:i+1])
		}
		total *= t.Dims[i]
	}
	typ, err := d.u32("tensor type")
	if err != nil {
		return t, err
	}
	t.Type = GGMLType(typ)
	if t.Offset, err = d.u64("tensor offset"); err != nil {
		return t, err
	}
	return t, nil
}

// value reads one value of type t; depth counts enclosing arrays.
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	if !t.valid() {
		return Value{}, fmt.Errorf("%w: unknown value type %d at offset %d", ErrCorrupt, uint32(t), d.pos-4)
	}
	if t == TypeString {
		s, err := d.str("string")
		return Value{t, s}, err
	}
	if t == TypeArray {
		a, err := d.array(depth + 1)
		return Value{t, a}, err
	}
	b, err := d.fixed(t.fixedSize(), t.String())
	if err != nil {
		return Value{}, err
	}
	return Value{t, scalar(t, b)}, nil
}

// scalar decodes a fixed-size value of type t from b.
func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeBool:
		return b[0] != 0
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("gguf: scalar called with " + t.String())
}
