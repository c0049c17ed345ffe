package gguf

import "math"

// Float32ToFloat16 converts f to IEEE 754 half precision with
// round-to-nearest-even, as ggml's F16C path does, so files we write hold
// the same bits llama.cpp's own converter would produce. Values beyond the
// half range become ±Inf; NaN stays NaN.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff

	if exp == 0xff { // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00 // overflow
	}
	if e <= 0 { // half subnormal (or zero)
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to zero
		}
		mant |= 0x800000
		shift := uint(14 - e)
		return sign | uint16(roundShift(mant, shift)) // a carry lands in the exponent: correct
	}
	// A carry out of the mantissa bumps the exponent, up to Inf: correct.
	return sign | uint16(uint32(e)<<10+roundShift(mant, 13))
}

// roundShift returns m >> shift rounded to nearest, ties to even.
func roundShift(m uint32, shift uint) uint32 {
	q := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// Float16ToFloat32 converts an IEEE 754 half to float32 (exactly).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(mant) / (1 << 24) // subnormal: mant × 2^-24
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
