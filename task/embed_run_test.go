package task

import (
	"math"
	"testing"
)

func TestNormalize(t *testing.T) {
	v, err := Normalize([]float32{0, 0, 0}, NormL2)
	if err != nil || v[0] != 0 {
		t.Errorf("zero vector: %v %v", v, err)
	}
	if _, err := Normalize([]float32{1, float32(math.NaN())}, NormL2); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := Normalize([]float32{1, float32(math.Inf(1))}, NormNone); err == nil {
		t.Error("inf accepted")
	}
	// A huge p neither overflows nor underflows: it tends to max-abs.
	v, _ = Normalize([]float32{3, -4, 1e-30}, 1000)
	if math.Abs(float64(v[1])+1) > 1e-3 {
		t.Errorf("1000-norm: %v", v)
	}
	v, _ = Normalize([]float32{3, -4}, 1)
	if math.Abs(float64(v[0])-3.0/7) > 1e-7 {
		t.Errorf("taxicab: %v", v)
	}
}
