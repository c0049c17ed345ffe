package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// QK8_0 is the number of values in a Q8_0 block.
const QK8_0 = 32

// Q8_0BlockBytes is the size of a Q8_0 block: an f16 scale d and 32 int8.
const Q8_0BlockBytes = 2 + QK8_0

// EncodeF32 writes src as little-endian float32 into dst (4 bytes each).
func EncodeF32(dst []byte, src []float32) {
	for i, x := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
	}
}

// EncodeF16 writes src as little-endian half floats into dst (2 bytes each).
func EncodeF16(dst []byte, src []float32) {
	for i, x := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToFloat16(x))
	}
}

// QuantizeQ8_0 encodes src (a multiple of 32 values) into dst
// (len(src)/32*34 bytes). Each block stores d = max|x|/127 as f16 and
// q = round(x/d), computed in float32 exactly as ggml's reference
// quantize_row_q8_0_ref does, so the bits match llama.cpp's quantizer.
func QuantizeQ8_0(dst []byte, src []float32) error {
	if len(src)%QK8_0 != 0 {
		return fmt.Errorf("gguf: q8_0 needs a multiple of %d values, got %d", QK8_0, len(src))
	}
	if want := len(src) / QK8_0 * Q8_0BlockBytes; len(dst) < want {
		return fmt.Errorf("gguf: q8_0 output buffer has %d bytes, want %d", len(dst), want)
	}
	for b := 0; b < len(src)/QK8_0; b++ {
		x := src[b*QK8_0 : (b+1)*QK8_0]
		out := dst[b*Q8_0BlockBytes : (b+1)*Q8_0BlockBytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, Float32ToFloat16(d))
		for j, v := range x {
			q := math.Round(float64(v * id)) // roundf: half away from zero
			out[2+j] = byte(int8(max(-128, min(127, q))))
		}
	}
	return nil
}

// DequantizeQ8_0 decodes Q8_0 blocks from src into dst (32 values per
// block); it is the inverse used by tests and diagnostics.
func DequantizeQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(src)/Q8_0BlockBytes && (b+1)*QK8_0 <= len(dst); b++ {
		blk := src[b*Q8_0BlockBytes:]
		d := Float16ToFloat32(binary.LittleEndian.Uint16(blk))
		for j := 0; j < QK8_0; j++ {
			dst[b*QK8_0+j] = d * float32(int8(blk[2+j]))
		}
	}
}

func abs32(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
}

// QK4_0 is the number of values in a Q4_0 block.
const QK4_0 = 32

// Q4_0BlockBytes is the size of a Q4_0 block: an f16 scale d and 32
// four-bit values, two to a byte.
const Q4_0BlockBytes = 2 + QK4_0/2

// QuantizeQ4_0 encodes src (a multiple of 32 values) into dst
// (len(src)/32*18 bytes) with the arithmetic of ggml's reference
// quantize_row_q4_0_ref: d is the block's value of largest magnitude,
// sign kept, divided by -8 (so that value maps to -8, the one end of the
// signed range with no positive twin), and each value is stored as
// trunc(x/d + 8.5) capped at 15. Byte j holds value j in its low nibble
// and value j+16 in its high nibble.
func QuantizeQ4_0(dst []byte, src []float32) error {
	if len(src)%QK4_0 != 0 {
		return fmt.Errorf("gguf: q4_0 needs a multiple of %d values, got %d", QK4_0, len(src))
	}
	if want := len(src) / QK4_0 * Q4_0BlockBytes; len(dst) < want {
		return fmt.Errorf("gguf: q4_0 output buffer has %d bytes, want %d", len(dst), want)
	}
	for b := 0; b < len(src)/QK4_0; b++ {
		x := src[b*QK4_0 : (b+1)*QK4_0]
		out := dst[b*Q4_0BlockBytes : (b+1)*Q4_0BlockBytes]
		var amax, peak float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, peak = a, v
			}
		}
		d := peak / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, Float32ToFloat16(d))
		for j := 0; j < QK4_0/2; j++ {
			out[2+j] = nibble4_0(x[j], id) | nibble4_0(x[j+QK4_0/2], id)<<4
		}
	}
	return nil
}

// nibble4_0 is one Q4_0 value: x/d shifted into [0, 16] and truncated, as
// the reference's (int8_t)(x*id + 8.5f), capped at 15. The conversions
// round each step to float32 (no fused multiply-add), as the C does.
func nibble4_0(x, id float32) byte {
	q := float32(float32(x*id) + 8.5)
	return byte(max(0, min(15, int32(q))))
}

// DequantizeQ4_0 decodes Q4_0 blocks from src into dst (32 values per
// block): d × (q − 8), the inverse used by tests and diagnostics.
func DequantizeQ4_0(dst []float32, src []byte) {
	for b := 0; b < len(src)/Q4_0BlockBytes && (b+1)*QK4_0 <= len(dst); b++ {
		blk := src[b*Q4_0BlockBytes:]
		d := Float16ToFloat32(binary.LittleEndian.Uint16(blk))
		for j := 0; j < QK4_0/2; j++ {
			dst[b*QK4_0+j] = d * float32(int(blk[2+j]&0x0f)-8)
			dst[b*QK4_0+j+QK4_0/2] = d * float32(int(blk[2+j]>>4)-8)
		}
	}
}
