package gguf

import (
	"fmt"
	"math"
)

// Value is one metadata value: a scalar of the Go type matching Type
// (uint8 … float64, bool, string) or, when Type is TypeArray, an Array.
type Value struct {
	Type ValueType
	v    any
}

// Array is a metadata array. Values is a typed slice matching Elem:
// []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
// []string, []uint64, []int64, []float64, or []Array for nested arrays.
type Array struct {
	Elem   ValueType
	Values any
}

// KV is one metadata key/value pair; files keep them in order.
type KV struct {
	Key   string
	Value Value
}

// Len is the number of elements in the array.
func (a Array) Len() int {
	switch s := a.Values.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []float32:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float64:
		return len(s)
	case []Array:
		return len(s)
	}
	return 0
}

// Any returns the Go value held: a scalar or an Array.
func (v Value) Any() any { return v.v }

// ValueOf wraps a Go value as a metadata value. Accepted: the scalar types
// uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64, float64; slices of those; Array; and Value itself.
func ValueOf(x any) (Value, error) {
	switch x := x.(type) {
	case Value:
		return x, nil
	case uint8:
		return Value{TypeUint8, x}, nil
	case int8:
		return Value{TypeInt8, x}, nil
	case uint16:
		return Value{TypeUint16, x}, nil
	case int16:
		return Value{TypeInt16, x}, nil
	case uint32:
		return Value{TypeUint32, x}, nil
	case int32:
		return Value{TypeInt32, x}, nil
	case float32:
		return Value{TypeFloat32, x}, nil
	case bool:
		return Value{TypeBool, x}, nil
	case string:
		return Value{TypeString, x}, nil
	case uint64:
		return Value{TypeUint64, x}, nil
	case int64:
		return Value{TypeInt64, x}, nil
	case float64:
		return Value{TypeFloat64, x}, nil
	case Array:
		if _, err := sliceElemType(x.Values); err != nil {
			return Value{}, err
		}
		return Value{TypeArray, x}, nil
	}
	elem, err := sliceElemType(x)
	if err != nil {
		return Value{}, err
	}
	return Value{TypeArray, Array{Elem: elem, Values: x}}, nil
}

// sliceElemType maps a typed slice to its GGUF element type.
func sliceElemType(s any) (ValueType, error) {
	switch s.(type) {
	case []uint8:
		return TypeUint8, nil
	case []int8:
		return TypeInt8, nil
	case []uint16:
		return TypeUint16, nil
	case []int16:
		return TypeInt16, nil
	case []uint32:
		return TypeUint32, nil
	case []int32:
		return TypeInt32, nil
	case []float32:
		return TypeFloat32, nil
	case []bool:
		return TypeBool, nil
	case []string:
		return TypeString, nil
	case []uint64:
		return TypeUint64, nil
	case []int64:
		return TypeInt64, nil
	case []float64:
		return TypeFloat64, nil
	case []Array:
		return TypeArray, nil
	}
	return 0, fmt.Errorf("gguf: unsupported metadata value type %T", s)
}

// Uint converts an integer value of any width to uint64; ok is false for
// non-integers and negative numbers.
func (v Value) Uint() (uint64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := v.signed(); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int converts an integer value of any width to int64; ok is false for
// non-integers and values above math.MaxInt64.
func (v Value) Int() (int64, bool) {
	if i, ok := v.signed(); ok {
		return i, true
	}
	if u, ok := v.Uint(); ok && u <= math.MaxInt64 {
		return int64(u), true
	}
	return 0, false
}

func (v Value) signed() (int64, bool) {
	switch x := v.v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// Float converts a float32 or float64 value to float64.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
