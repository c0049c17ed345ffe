package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// array reads an array body: element type, count, elements.
func (d *decoder) array(depth int) (Array, error) {
	if depth > maxNesting {
		return Array{}, fmt.Errorf("%w: arrays nested deeper than %d", ErrCorrupt, maxNesting)
	}
	et, err := d.u32("array element type")
	if err != nil {
		return Array{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Array{}, fmt.Errorf("%w: unknown array element type %d at offset %d", ErrCorrupt, et, d.pos-4)
	}
	n, err := d.count("array length", elem.minSize())
	if err != nil {
		return Array{}, err
	}
	switch elem {
	case TypeString:
		s := make([]string, 0, min(n, chunk))
		for i := uint64(0); i < n; i++ {
			v, err := d.str("array string")
			if err != nil {
				return Array{}, fmt.Errorf("element %d: %w", i, err)
			}
			s = append(s, v)
		}
		return Array{elem, s}, nil
	case TypeArray:
		s := make([]Array, 0, min(n, chunk))
		for i := uint64(0); i < n; i++ {
			v, err := d.array(depth + 1)
			if err != nil {
				return Array{}, fmt.Errorf("element %d: %w", i, err)
			}
			s = append(s, v)
		}
		return Array{elem, s}, nil
	}
	size := uint64(elem.fixedSize())
	raw, err := d.bytes(n*size, elem.String()+" array") // n*size cannot overflow: fits() bounded n
	if err != nil {
		return Array{}, err
	}
	return Array{elem, decodeFixed(elem, raw, int(n))}, nil
}

// decodeFixed turns n packed little-endian values of type t into a typed
// slice.
func decodeFixed(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b
	case TypeInt8:
		s := make([]int8, n)
		for i := range s {
			s[i] = int8(b[i])
		}
		return s
	case TypeBool:
		s := make([]bool, n)
		for i := range s {
			s[i] = b[i] != 0
		}
		return s
	case TypeUint16:
		s := make([]uint16, n)
		for i := range s {
			s[i] = le.Uint16(b[2*i:])
		}
		return s
	case TypeInt16:
		s := make([]int16, n)
		for i := range s {
			s[i] = int16(le.Uint16(b[2*i:]))
		}
		return s
	case TypeUint32:
		s := make([]uint32, n)
		for i := range s {
			s[i] = le.Uint32(b[4*i:])
		}
		return s
	case TypeInt32:
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(le.Uint32(b[4*i:]))
		}
		return s
	case TypeFloat32:
		s := make([]float32, n)
		for i := range s {
			s[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return s
	case TypeUint64:
		s := make([]uint64, n)
		for i := range s {
			s[i] = le.Uint64(b[8*i:])
		}
		return s
	case TypeInt64:
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(le.Uint64(b[8*i:]))
		}
		return s
	case TypeFloat64:
		s := make([]float64, n)
		for i := range s {
			s[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return s
	}
	panic("gguf: decodeFixed called with " + t.String())
}
