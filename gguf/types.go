package gguf

import "fmt"

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, numbered as in the GGUF specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// valid reports whether t is a known value type.
func (t ValueType) valid() bool { return t <= TypeFloat64 }

// fixedSize is the encoded size of a scalar of type t, or 0 for the
// variable-length string and array types.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the smallest number of bytes one value of type t can occupy:
// used to reject element counts that cannot possibly fit in the file.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8 // length prefix
	case TypeArray:
		return 12 // element type + count
	}
	return t.fixedSize()
}

// GGMLType identifies the encoding of a tensor's data.
type GGMLType uint32

// The ggml tensor types. The numbering is ggml's and must not change; the
// gaps are types ggml has retired.
const (
	F32     GGMLType = 0
	F16     GGMLType = 1
	Q4_0    GGMLType = 2
	Q4_1    GGMLType = 3
	Q5_0    GGMLType = 6
	Q5_1    GGMLType = 7
	Q8_0    GGMLType = 8
	Q8_1    GGMLType = 9
	Q2_K    GGMLType = 10
	Q3_K    GGMLType = 11
	Q4_K    GGMLType = 12
	Q5_K    GGMLType = 13
	Q6_K    GGMLType = 14
	Q8_K    GGMLType = 15
	IQ2_XXS GGMLType = 16
	IQ2_XS  GGMLType = 17
	IQ3_XXS GGMLType = 18
	IQ1_S   GGMLType = 19
	IQ4_NL  GGMLType = 20
	IQ3_S   GGMLType = 21
	IQ2_S   GGMLType = 22
	IQ4_XS  GGMLType = 23
	I8      GGMLType = 24
	I16     GGMLType = 25
	I32     GGMLType = 26
	I64     GGMLType = 27
	F64     GGMLType = 28
	IQ1_M   GGMLType = 29
	BF16    GGMLType = 30
	TQ1_0   GGMLType = 34
	TQ2_0   GGMLType = 35
	MXFP4   GGMLType = 39
)

// typeInfo is the block layout of a ggml type: BlockSize values are stored
// in BlockBytes bytes.
type typeInfo struct {
	name       string
	blockSize  int
	blockBytes int
}

// ggmlTypes mirrors ggml's type_traits table (block sizes from
// ggml-common.h) so tensor byte sizes can be computed for any file.
var ggmlTypes = map[GGMLType]typeInfo{
	F32:     {"f32", 1, 4},
	F16:     {"f16", 1, 2},
	Q4_0:    {"q4_0", 32, 18},
	Q4_1:    {"q4_1", 32, 20},
	Q5_0:    {"q5_0", 32, 22},
	Q5_1:    {"q5_1", 32, 24},
	Q8_0:    {"q8_0", 32, 34},
	Q8_1:    {"q8_1", 32, 36},
	Q2_K:    {"q2_K", 256, 84},
	Q3_K:    {"q3_K", 256, 110},
	Q4_K:    {"q4_K", 256, 144},
	Q5_K:    {"q5_K", 256, 176},
	Q6_K:    {"q6_K", 256, 210},
	Q8_K:    {"q8_K", 256, 292},
	IQ2_XXS: {"iq2_xxs", 256, 66},
	IQ2_XS:  {"iq2_xs", 256, 74},
	IQ3_XXS: {"iq3_xxs", 256, 98},
	IQ1_S:   {"iq1_s", 256, 50},
	IQ4_NL:  {"iq4_nl", 32, 18},
	IQ3_S:   {"iq3_s", 256, 110},
	IQ2_S:   {"iq2_s", 256, 82},
	IQ4_XS:  {"iq4_xs", 256, 136},
	I8:      {"i8", 1, 1},
	I16:     {"i16", 1, 2},
	I32:     {"i32", 1, 4},
	I64:     {"i64", 1, 8},
	F64:     {"f64", 1, 8},
	IQ1_M:   {"iq1_m", 256, 56},
	BF16:    {"bf16", 1, 2},
	TQ1_0:   {"tq1_0", 256, 54},
	TQ2_0:   {"tq2_0", 256, 66},
	MXFP4:   {"mxfp4", 32, 17},
}

func (t GGMLType) String() string {
	if info, ok := ggmlTypes[t]; ok {
		return info.name
	}
	return fmt.Sprintf("GGMLType(%d)", uint32(t))
}

// TypeByName is the ggml type llama.cpp names name ("f16", "q8_0", …, as
// its --cache-type-k/-v spell them); ok is false for a name it does not know.
func TypeByName(name string) (t GGMLType, ok bool) {
	for t, info := range ggmlTypes {
		if info.name == name {
			return t, true
		}
	}
	return 0, false
}

// Known reports whether t is a ggml type this package knows the layout of.
func (t GGMLType) Known() bool {
	_, ok := ggmlTypes[t]
	return ok
}

// BlockSize is the number of values in one block of type t (1 for plain
// types, 32 for Q8_0 and Q4_0), or 0 if t is unknown.
func (t GGMLType) BlockSize() int { return ggmlTypes[t].blockSize }

// BlockBytes is the encoded size in bytes of one block of type t (34 for
// Q8_0: an f16 scale and 32 int8 values), or 0 if t is unknown.
func (t GGMLType) BlockBytes() int { return ggmlTypes[t].blockBytes }

// RowBytes is the encoded size of n consecutive values of type t. It fails
// when t is unknown or n is not a whole number of blocks, which ggml cannot
// represent.
func (t GGMLType) RowBytes(n uint64) (uint64, error) {
	info, ok := ggmlTypes[t]
	if !ok {
		return 0, fmt.Errorf("gguf: unknown ggml type %d", uint32(t))
	}
	if n%uint64(info.blockSize) != 0 {
		return 0, fmt.Errorf("gguf: %d values of type %s are not a whole number of %d-value blocks", n, t, info.blockSize)
	}
	return n / uint64(info.blockSize) * uint64(info.blockBytes), nil
}
