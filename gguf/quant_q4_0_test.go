package gguf

import (
	"encoding/binary"
	"math"
	"testing"
)

// A block worked by hand: the largest magnitude is -16 (value 0), so
// d = -16/-8 = 2 and q = trunc(x/2 + 8.5) capped at 15.
func TestQuantizeQ4_0KnownBlock(t *testing.T) {
	src := make([]float32, 32)
	for i := range src {
		src[i] = float32(i) - 16 // -16 … 15
	}
	dst := make([]byte, Q4_0BlockBytes)
	if err := QuantizeQ4_0(dst, src); err != nil {
		t.Fatal(err)
	}
	if d := binary.LittleEndian.Uint16(dst); d != Float32ToFloat16(2) {
		t.Fatalf("scale = %#04x, want %#04x (2.0)", d, Float32ToFloat16(2))
	}
	want := func(x float32) byte { return byte(min(15, int(x/2+8.5))) }
	for j := 0; j < 16; j++ {
		lo, hi := dst[2+j]&0x0f, dst[2+j]>>4
		if lo != want(src[j]) || hi != want(src[j+16]) {
			t.Errorf("byte %d = %#02x: nibbles %d/%d, want %d/%d", j, dst[2+j], lo, hi, want(src[j]), want(src[j+16]))
		}
	}
	// -16 → 0, 0 → 8, 15 → trunc(16) = 16 capped to 15.
	if dst[2]&0x0f != 0 || dst[2]>>4 != 8 || dst[2+15]>>4 != 15 {
		t.Errorf("ends: %#02x %#02x, want low 0 high 8, and high 15", dst[2], dst[2+15])
	}
}

// The sign of the scale follows the peak: a positive peak maps to -8
// through a negative d, and dequantizes back to itself.
func TestQuantizeQ4_0PositivePeak(t *testing.T) {
	src := make([]float32, 32)
	src[5] = 4
	src[20] = -1
	dst := make([]byte, Q4_0BlockBytes)
	if err := QuantizeQ4_0(dst, src); err != nil {
		t.Fatal(err)
	}
	if d := Float16ToFloat32(binary.LittleEndian.Uint16(dst)); d != -0.5 {
		t.Fatalf("d = %g, want -0.5", d)
	}
	back := make([]float32, 32)
	DequantizeQ4_0(back, dst)
	if back[5] != 4 || back[20] != -1 || back[0] != 0 {
		t.Fatalf("dequantized %g %g %g, want 4 -1 0", back[5], back[20], back[0])
	}
}

func TestQuantizeQ4_0Zero(t *testing.T) {
	dst := make([]byte, 2*Q4_0BlockBytes)
	for i := range dst {
		dst[i] = 0xff
	}
	if err := QuantizeQ4_0(dst, make([]float32, 64)); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 2; b++ {
		blk := dst[b*Q4_0BlockBytes : (b+1)*Q4_0BlockBytes]
		// d = 0 / -8 is -0 in float32, as in the C reference: f16 0x8000.
		if d := Float16ToFloat32(binary.LittleEndian.Uint16(blk)); d != 0 {
			t.Fatalf("block %d: scale %g, want 0", b, d)
		}
		for j, q := range blk[2:] {
			if q != 0x88 { // both nibbles 8: zero
				t.Fatalf("block %d byte %d = %#x, want 0x88", b, j, q)
			}
		}
	}
}

// Every value comes back within half a step (|d|/2), plus the f16
// scale's rounding, except the top of the range: x/d in (7.5, 8] is
// capped at 15, so a value there may be off by up to one step.
func TestQuantizeQ4_0Error(t *testing.T) {
	vals := make([]float32, 4096)
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i)*0.37)) * float32(1+i%7)
	}
	q := make([]byte, len(vals)/32*Q4_0BlockBytes)
	if err := QuantizeQ4_0(q, vals); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, len(vals))
	DequantizeQ4_0(back, q)
	var sumSq, sumErr float64
	for b := 0; b < len(vals)/32; b++ {
		var amax float64
		for _, v := range vals[b*32 : b*32+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		step := amax / 8
		for j := b * 32; j < b*32+32; j++ {
			tol := step/2*1.01 + amax*1e-3
			if r := float64(vals[j]) / float64(Float16ToFloat32(binary.LittleEndian.Uint16(q[b*Q4_0BlockBytes:]))); r > 7.5 {
				tol = step*1.01 + amax*1e-3
			}
			e := math.Abs(float64(back[j] - vals[j]))
			if e > tol {
				t.Fatalf("value %d: %g -> %g, error %g > %g", j, vals[j], back[j], e, tol)
			}
			sumSq += float64(vals[j]) * float64(vals[j])
			sumErr += e * e
		}
	}
	// Four bits: the error's energy is a few percent of the signal's.
	if rel := math.Sqrt(sumErr / sumSq); rel > 0.1 {
		t.Fatalf("relative RMS error %.3f, want < 0.1", rel)
	}
}

func TestQuantizeQ4_0BadLength(t *testing.T) {
	if err := QuantizeQ4_0(make([]byte, 100), make([]float32, 33)); err == nil {
		t.Fatal("33 values accepted")
	}
	if err := QuantizeQ4_0(make([]byte, 17), make([]float32, 32)); err == nil {
		t.Fatal("short output buffer accepted")
	}
}
