package gguf

import "testing"

// The quantization level comes from general.file_type when it names one,
// else from the most common tensor type.
func TestQuantizationLevel(t *testing.T) {
	ft := func(n uint32) KV {
		v, err := ValueOf(n)
		if err != nil {
			t.Fatal(err)
		}
		return KV{Key: "general.file_type", Value: v}
	}
	tensors := []TensorInfo{{Type: Q8_0}, {Type: F32}, {Type: Q8_0}}
	for _, tc := range []struct {
		f    *File
		want string
	}{
		{nil, "unknown"},
		{&File{}, "unknown"},
		{&File{KVs: []KV{ft(15)}, Tensors: tensors}, "Q4_K_M"},
		{&File{KVs: []KV{ft(1)}}, "F16"},
		{&File{KVs: []KV{ft(99)}, Tensors: tensors}, "Q8_0"},
		{&File{Tensors: tensors}, "Q8_0"},
	} {
		if got := tc.f.QuantizationLevel(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}
