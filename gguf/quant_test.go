package gguf

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestQuantizeQ8_0KnownBlock(t *testing.T) {
	src := make([]float32, 32)
	for i := range src {
		src[i] = float32(i) - 16 // -16 … 15: amax 16
	}
	dst := make([]byte, Q8_0BlockBytes)
	if err := QuantizeQ8_0(dst, src); err != nil {
		t.Fatal(err)
	}
	d := binary.LittleEndian.Uint16(dst)
	if want := Float32ToFloat16(16.0 / 127); d != want {
		t.Fatalf("scale = %#04x, want %#04x", d, want)
	}
	id := 1 / (float32(16) / 127)
	for i, x := range src {
		want := int8(math.Round(float64(x * id)))
		if got := int8(dst[2+i]); got != want {
			t.Errorf("q[%d] = %d, want %d", i, got, want)
		}
	}
	if int8(dst[2]) != -127 {
		t.Errorf("the largest magnitude must map to -127, got %d", int8(dst[2]))
	}
}

func TestQuantizeQ8_0Zero(t *testing.T) {
	dst := make([]byte, 2*Q8_0BlockBytes)
	for i := range dst {
		dst[i] = 0xff
	}
	if err := QuantizeQ8_0(dst, make([]float32, 64)); err != nil {
		t.Fatal(err)
	}
	for i, b := range dst {
		if b != 0 {
			t.Fatalf("byte %d = %#x, want 0 for an all-zero block", i, b)
		}
	}
}

func TestQuantizeQ8_0Error(t *testing.T) {
	vals := make([]float32, 4096)
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i)*0.37)) * float32(1+i%7)
	}
	q := make([]byte, len(vals)/32*Q8_0BlockBytes)
	if err := QuantizeQ8_0(q, vals); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, len(vals))
	DequantizeQ8_0(back, q)
	for b := 0; b < len(vals)/32; b++ {
		var amax float64
		for _, v := range vals[b*32 : b*32+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		tol := amax/127/2*1.01 + amax*1e-3 // half a step, plus the f16 scale's rounding
		for j := b * 32; j < b*32+32; j++ {
			if e := math.Abs(float64(back[j] - vals[j])); e > tol {
				t.Fatalf("value %d: %g -> %g, error %g > %g", j, vals[j], back[j], e, tol)
			}
		}
	}
}

func TestQuantizeQ8_0BadLength(t *testing.T) {
	if err := QuantizeQ8_0(make([]byte, 100), make([]float32, 33)); err == nil {
		t.Fatal("33 values accepted")
	}
	if err := QuantizeQ8_0(make([]byte, 33), make([]float32, 32)); err == nil {
		t.Fatal("short output buffer accepted")
	}
}

func TestTypeSizes(t *testing.T) {
	cases := []struct {
		t            GGMLType
		block, bytes int
	}{
		{F32, 1, 4}, {F16, 1, 2}, {Q4_0, 32, 18}, {Q8_0, 32, 34}, {Q4_K, 256, 144}, {Q6_K, 256, 210},
	}
	for _, c := range cases {
		if c.t.BlockSize() != c.block || c.t.BlockBytes() != c.bytes {
			t.Errorf("%s: block %d/%d bytes, want %d/%d", c.t, c.t.BlockSize(), c.t.BlockBytes(), c.block, c.bytes)
		}
	}
	if uint32(F32) != 0 || uint32(F16) != 1 || uint32(Q4_0) != 2 || uint32(Q8_0) != 8 {
		t.Error("ggml type ids changed")
	}
	if n, err := Q8_0.RowBytes(896); err != nil || n != 28*34 {
		t.Errorf("Q8_0.RowBytes(896) = %d, %v", n, err)
	}
	if _, err := Q8_0.RowBytes(33); err == nil {
		t.Error("Q8_0.RowBytes(33) accepted a partial block")
	}
}
