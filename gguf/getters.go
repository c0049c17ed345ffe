package gguf

import "math"

// Keys lists the metadata keys in file order.
func (f *File) Keys() []string {
	keys := make([]string, len(f.KVs))
	for i, kv := range f.KVs {
		keys[i] = kv.Key
	}
	return keys
}

// Value returns the value stored under key.
func (f *File) Value(key string) (Value, bool) {
	if f.index == nil {
		f.buildIndex()
	}
	i, ok := f.index[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

func (f *File) buildIndex() {
	f.index = make(map[string]int, len(f.KVs))
	for i, kv := range f.KVs {
		f.index[kv.Key] = i
	}
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Value(key)
	if !ok {
		return "", false
	}
	s, ok := v.v.(string)
	return s, ok
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Value(key)
	if !ok {
		return false, false
	}
	b, ok := v.v.(bool)
	return b, ok
}

// Uint64 returns a non-negative integer value of any stored width.
func (f *File) Uint64(key string) (uint64, bool) {
	v, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	return v.Uint()
}

// Uint32 returns an integer value of any stored width that fits in uint32.
func (f *File) Uint32(key string) (uint32, bool) {
	u, ok := f.Uint64(key)
	if !ok || u > math.MaxUint32 {
		return 0, false
	}
	return uint32(u), true
}

// Int64 returns an integer value of any stored width that fits in int64.
func (f *File) Int64(key string) (int64, bool) {
	v, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	return v.Int()
}

// Float64 returns a float32 or float64 value.
func (f *File) Float64(key string) (float64, bool) {
	v, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	return v.Float()
}

// Float32 returns a float32 or float64 value as float32.
func (f *File) Float32(key string) (float32, bool) {
	x, ok := f.Float64(key)
	return float32(x), ok
}

// Array returns an array value.
func (f *File) Array(key string) (Array, bool) {
	v, ok := f.Value(key)
	if !ok {
		return Array{}, false
	}
	a, ok := v.v.(Array)
	return a, ok
}

// Strings returns an array of strings.
func (f *File) Strings(key string) ([]string, bool) {
	a, ok := f.Array(key)
	if !ok {
		return nil, false
	}
	s, ok := a.Values.([]string)
	return s, ok
}

// Int32s returns an array of int32 (token types are stored this way).
func (f *File) Int32s(key string) ([]int32, bool) {
	a, ok := f.Array(key)
	if !ok {
		return nil, false
	}
	s, ok := a.Values.([]int32)
	return s, ok
}

// Float32s returns an array of float32 (token scores are stored this way).
func (f *File) Float32s(key string) ([]float32, bool) {
	a, ok := f.Array(key)
	if !ok {
		return nil, false
	}
	s, ok := a.Values.([]float32)
	return s, ok
}

// Tensor returns the descriptor of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}
