package gguf

import (
	"math"
	"testing"
)

func TestFloat32ToFloat16KnownValues(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{0.1, 0x2e66},
		{1.0 / 3, 0x3555},
		{65504, 0x7bff},                  // largest half
		{65519, 0x7bff},                  // below the midpoint to Inf
		{65520, 0x7c00},                  // midpoint ties to even: Inf
		{1e6, 0x7c00},                    // overflow
		{-1e6, 0xfc00},                   // negative overflow
		{6.103515625e-05, 0x0400},        // smallest normal, 2^-14
		{5.960464477539063e-08, 0x0001},  // smallest subnormal, 2^-24
		{2.9802322387695312e-08, 0x0000}, // 2^-25: tie to even, rounds to 0
		{4.470348358154297e-08, 0x0001},  // 1.5 × 2^-25 rounds up
		{1e-10, 0x0000},                  // underflow
		{1 + 1.0/2048, 0x3c00},           // halfway between 1 and next: even
		{1 + 3.0/2048, 0x3c02},           // halfway, odd below: rounds up
		{1 + 1.0/2048 + 1.0/65536, 0x3c01},
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
	}
	for _, c := range cases {
		if got := Float32ToFloat16(c.in); got != c.want {
			t.Errorf("Float32ToFloat16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if h := Float32ToFloat16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN converted to %#04x, not a NaN", h)
	}
}

// Every half value converts to float32 and back unchanged.
func TestFloat16RoundTripAll(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := Float16ToFloat32(h)
		if f != f { // NaN
			continue
		}
		if back := Float32ToFloat16(f); back != h {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

// Conversion picks the nearest half, ties to even, against a brute-force
// reference over neighbours.
func TestFloat32ToFloat16Nearest(t *testing.T) {
	for i := 0; i < 200000; i++ {
		f := float32(math.Ldexp(float64(i%9973)/9973+1, i%40-25))
		if i%2 == 1 {
			f = -f
		}
		h := Float32ToFloat16(f)
		got := float64(Float16ToFloat32(h))
		for _, n := range []uint16{h - 1, h + 1} {
			alt := float64(Float16ToFloat32(n))
			if math.IsInf(alt, 0) || math.IsNaN(alt) || math.Signbit(alt) != math.Signbit(got) {
				continue
			}
			d, da := math.Abs(got-float64(f)), math.Abs(alt-float64(f))
			if da < d || (da == d && n&1 == 0) {
				t.Fatalf("%g -> %#04x (%g), but %#04x (%g) is nearer or an even tie", f, h, got, n, alt)
			}
		}
	}
}
