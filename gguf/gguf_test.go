package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// sampleKVs covers every value type, including nested arrays.
func sampleKVs() []KV {
	must := func(x any) Value {
		v, err := ValueOf(x)
		if err != nil {
			panic(err)
		}
		return v
	}
	return []KV{
		{"general.architecture", must("llama")},
		{"u8", must(uint8(200))},
		{"i8", must(int8(-100))},
		{"u16", must(uint16(60000))},
		{"i16", must(int16(-30000))},
		{"u32", must(uint32(4000000000))},
		{"i32", must(int32(-2000000000))},
		{"f32", must(float32(1.5))},
		{"bool", must(true)},
		{"str", must("héllo\nwörld")},
		{"empty", must("")},
		{"u64", must(uint64(1) << 60)},
		{"i64", must(int64(-1) << 60)},
		{"f64", must(3.25)},
		{"strs", must([]string{"a", "", "ĠtheĊ"})},
		{"i32s", must([]int32{1, -2, 3})},
		{"f32s", must([]float32{0.5, -1})},
		{"u8s", must([]uint8{1, 2, 3})},
		{"bools", must([]bool{true, false})},
		{"f64s", must([]float64{})},
		{"nested", must(Array{Elem: TypeArray, Values: []Array{
			{Elem: TypeString, Values: []string{"x", "y"}},
			{Elem: TypeInt64, Values: []int64{7}},
			{Elem: TypeArray, Values: []Array{{Elem: TypeFloat32, Values: []float32{2}}}},
		}})},
	}
}

// sampleFile writes a small model with streamed and in-memory tensors.
func sampleFile(t testing.TB) ([]byte, map[string][]byte) {
	w := NewWriter()
	for _, kv := range sampleKVs() {
		w.SetValue(kv.Key, kv.Value)
	}
	data := map[string][]byte{}
	f32 := make([]byte, 4*5)
	EncodeF32(f32, []float32{1, 2, 3, 4, 5})
	data["norm"] = f32
	w.AddTensor(Tensor{Name: "norm", Shape: []uint64{5}, Type: F32, Data: f32})

	f16 := make([]byte, 2*3*4)
	EncodeF16(f16, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	data["m16"] = f16
	w.AddTensor(Tensor{Name: "m16", Shape: []uint64{3, 4}, Type: F16, Produce: func(out io.Writer) error {
		_, err := out.Write(f16)
		return err
	}})

	vals := make([]float32, 64*2)
	for i := range vals {
		vals[i] = float32(i) / 10
	}
	q8 := make([]byte, len(vals)/32*Q8_0BlockBytes)
	if err := QuantizeQ8_0(q8, vals); err != nil {
		t.Fatal(err)
	}
	data["q8"] = q8
	w.AddTensor(Tensor{Name: "q8", Shape: []uint64{64, 2}, Type: Q8_0, Data: q8})

	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes(), data
}

func TestRoundTrip(t *testing.T) {
	raw, data := sampleFile(t)
	// A seekable reader, a reader of unknown size, and a file on disk.
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	fromBytes, err := Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	fromStream, err := Read(iotest.HalfReader(bytes.NewBuffer(raw)))
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*File{"bytes": fromBytes, "stream": fromStream, "file": fromFile} {
		t.Run(name, func(t *testing.T) {
			if f.Version != Version || f.Alignment != DefaultAlignment {
				t.Errorf("version %d alignment %d", f.Version, f.Alignment)
			}
			if !reflect.DeepEqual(f.KVs, sampleKVs()) {
				t.Errorf("KVs differ:\n got %#v\nwant %#v", f.KVs, sampleKVs())
			}
			if f.DataOffset%32 != 0 || f.DataOffset < f.HeaderSize {
				t.Errorf("data offset %d, header %d", f.DataOffset, f.HeaderSize)
			}
			want := []TensorInfo{
				{Name: "norm", Dims: []uint64{5}, Type: F32, Offset: 0},
				{Name: "m16", Dims: []uint64{3, 4}, Type: F16, Offset: 32},
				{Name: "q8", Dims: []uint64{64, 2}, Type: Q8_0, Offset: 64},
			}
			if !reflect.DeepEqual(f.Tensors, want) {
				t.Errorf("tensors %+v, want %+v", f.Tensors, want)
			}
			for _, ti := range f.Tensors {
				n, err := ti.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				start := f.DataOffset + int64(ti.Offset)
				if got := raw[start : start+int64(n)]; !bytes.Equal(got, data[ti.Name]) {
					t.Errorf("tensor %s data differs", ti.Name)
				}
			}
		})
	}
	if int64(len(raw))%32 != 0 {
		t.Errorf("file size %d is not padded to the alignment", len(raw))
	}
}

func TestGetters(t *testing.T) {
	raw, _ := sampleFile(t)
	f, err := Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := f.String("general.architecture"); !ok || s != "llama" {
		t.Errorf("String = %q, %v", s, ok)
	}
	if v, ok := f.Uint32("u32"); !ok || v != 4000000000 {
		t.Errorf("Uint32 = %d, %v", v, ok)
	}
	if v, ok := f.Uint32("u8"); !ok || v != 200 {
		t.Errorf("Uint32 of a uint8 = %d, %v", v, ok)
	}
	if _, ok := f.Uint32("i8"); ok {
		t.Error("Uint32 accepted a negative value")
	}
	if _, ok := f.Uint32("u64"); ok {
		t.Error("Uint32 accepted a value above MaxUint32")
	}
	if v, ok := f.Int64("i64"); !ok || v != -1<<60 {
		t.Errorf("Int64 = %d, %v", v, ok)
	}
	if v, ok := f.Float32("f32"); !ok || v != 1.5 {
		t.Errorf("Float32 = %g, %v", v, ok)
	}
	if v, ok := f.Float64("f64"); !ok || v != 3.25 {
		t.Errorf("Float64 = %g, %v", v, ok)
	}
	if v, ok := f.Bool("bool"); !ok || !v {
		t.Errorf("Bool = %v, %v", v, ok)
	}
	if s, ok := f.Strings("strs"); !ok || len(s) != 3 || s[2] != "ĠtheĊ" {
		t.Errorf("Strings = %q, %v", s, ok)
	}
	if s, ok := f.Int32s("i32s"); !ok || len(s) != 3 || s[1] != -2 {
		t.Errorf("Int32s = %v, %v", s, ok)
	}
	if s, ok := f.Float32s("f32s"); !ok || len(s) != 2 {
		t.Errorf("Float32s = %v, %v", s, ok)
	}
	if a, ok := f.Array("nested"); !ok || a.Elem != TypeArray || a.Len() != 3 {
		t.Errorf("Array = %+v, %v", a, ok)
	}
	if _, ok := f.String("u32"); ok {
		t.Error("String accepted a number")
	}
	if _, ok := f.String("missing"); ok {
		t.Error("missing key found")
	}
	if ti, ok := f.Tensor("m16"); !ok || ti.Elements() != 12 {
		t.Errorf("Tensor = %+v, %v", ti, ok)
	}
	if keys := f.Keys(); len(keys) != len(sampleKVs()) || keys[0] != "general.architecture" {
		t.Errorf("Keys = %v", keys)
	}
}

func TestCustomAlignment(t *testing.T) {
	w := NewWriter()
	w.Set(KeyAlignment, uint32(64))
	w.AddTensor(Tensor{Name: "a", Shape: []uint64{3}, Type: F32, Data: make([]byte, 12)})
	w.AddTensor(Tensor{Name: "b", Shape: []uint64{3}, Type: F32, Data: make([]byte, 12)})
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 {
		t.Errorf("alignment %d, data offset %d, second tensor at %d", f.Alignment, f.DataOffset, f.Tensors[1].Offset)
	}
}

func TestWriterErrors(t *testing.T) {
	cases := map[string]func(w *Writer){
		"unsupported value": func(w *Writer) { w.Set("k", struct{}{}) },
		"duplicate tensor": func(w *Writer) {
			w.AddTensor(Tensor{Name: "a", Shape: []uint64{1}, Type: F32, Data: make([]byte, 4)})
			w.AddTensor(Tensor{Name: "a", Shape: []uint64{1}, Type: F32, Data: make([]byte, 4)})
		},
		"partial block": func(w *Writer) {
			w.AddTensor(Tensor{Name: "a", Shape: []uint64{33}, Type: Q8_0, Data: make([]byte, 34)})
		},
		"wrong data size": func(w *Writer) {
			w.AddTensor(Tensor{Name: "a", Shape: []uint64{2}, Type: F32, Data: make([]byte, 4)})
		},
		"short producer": func(w *Writer) {
			w.AddTensor(Tensor{Name: "a", Shape: []uint64{2}, Type: F32, Produce: func(w io.Writer) error {
				_, err := w.Write(make([]byte, 4))
				return err
			}})
		},
		"bad alignment": func(w *Writer) { w.Set(KeyAlignment, uint32(48)) },
	}
	for name, build := range cases {
		w := NewWriter()
		build(w)
		if _, err := w.WriteTo(io.Discard); err == nil || !strings.HasPrefix(err.Error(), "gguf: ") {
			t.Errorf("%s: err = %v, want a gguf: error", name, err)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	w := NewWriter()
	w.Set("a", "b")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	bad := NewWriter()
	bad.AddTensor(Tensor{Name: "a", Shape: []uint64{2}, Type: F32, Produce: func(io.Writer) error { return io.ErrClosedPipe }})
	if err := bad.WriteFile(path); err == nil {
		t.Fatal("failing producer did not fail WriteFile")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the first file (no temporary left)", len(entries))
	}
	if f, err := Open(path); err != nil {
		t.Fatal(err)
	} else if s, _ := f.String("a"); s != "b" {
		t.Fatal("failed write replaced the earlier file")
	}
}

func header(version uint32, nTensors, nKV uint64) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nTensors)
	return binary.LittleEndian.AppendUint64(b, nKV)
}

func appendStr(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
}

func TestReadErrors(t *testing.T) {
	valid, _ := sampleFile(t)
	hugeString := appendStr(header(3, 0, 1), "k")
	hugeString = binary.LittleEndian.AppendUint32(hugeString, uint32(TypeString))
	hugeString = binary.LittleEndian.AppendUint64(hugeString, 1<<62)
	hugeArray := appendStr(header(3, 0, 1), "k")
	hugeArray = binary.LittleEndian.AppendUint32(hugeArray, uint32(TypeArray))
	hugeArray = binary.LittleEndian.AppendUint32(hugeArray, uint32(TypeUint64))
	hugeArray = binary.LittleEndian.AppendUint64(hugeArray, 1<<61)
	badType := appendStr(header(3, 0, 1), "k")
	badType = binary.LittleEndian.AppendUint32(badType, 13)
	deep := appendStr(header(3, 0, 1), "k")
	deep = binary.LittleEndian.AppendUint32(deep, uint32(TypeArray))
	for i := 0; i < 20; i++ {
		deep = binary.LittleEndian.AppendUint32(deep, uint32(TypeArray))
		deep = binary.LittleEndian.AppendUint64(deep, 1)
	}
	tooManyDims := appendStr(header(3, 1, 0), "t")
	tooManyDims = binary.LittleEndian.AppendUint32(tooManyDims, 5)
	tooManyDims = append(tooManyDims, make([]byte, 64)...)
	pastEnd := appendStr(header(3, 1, 0), "t")
	pastEnd = binary.LittleEndian.AppendUint32(pastEnd, 1)
	pastEnd = binary.LittleEndian.AppendUint64(pastEnd, 1000)
	pastEnd = binary.LittleEndian.AppendUint32(pastEnd, uint32(F32))
	pastEnd = binary.LittleEndian.AppendUint64(pastEnd, 0)

	cases := []struct {
		name string
		in   []byte
		want error
		text string
	}{
		{"empty", nil, ErrNotGGUF, "not a GGUF file"},
		{"zip", []byte("PK\x03\x04rest of a zip"), ErrNotGGUF, "not a GGUF file"},
		{"text", []byte("hello world, not a model"), ErrNotGGUF, `"hell"`},
		{"version 1", header(1, 0, 0), ErrUnsupportedVersion, "version 1"},
		{"version 4", header(4, 0, 0), ErrUnsupportedVersion, "version 4"},
		{"header cut", header(3, 0, 0)[:12], ErrTruncated, "truncated"},
		{"too many kvs", header(3, 0, 1<<40), ErrTruncated, "metadata count"},
		{"too many tensors", header(3, 1<<40, 0), ErrTruncated, "tensor count"},
		{"huge string", hugeString, ErrTruncated, "bytes left"},
		{"huge array", hugeArray, ErrTruncated, "array length"},
		{"bad value type", badType, ErrCorrupt, "unknown value type 13"},
		{"deep nesting", deep, ErrCorrupt, "nested"},
		{"too many dims", tooManyDims, ErrCorrupt, "5 dimensions"},
		{"data past end", pastEnd, ErrTruncated, "past the end"},
		{"truncated model", valid[:len(valid)-40], ErrTruncated, "past the end"},
	}
	for _, c := range cases {
		_, err := Read(bytes.NewReader(c.in))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: message %q lacks the gguf: prefix or %q", c.name, err, c.text)
		}
	}
}

// Every prefix of a valid file is rejected, with or without a known size.
func TestReadEveryTruncation(t *testing.T) {
	valid, _ := sampleFile(t)
	f, err := Read(bytes.NewReader(valid))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < int(f.HeaderSize); n++ {
		if _, err := Read(bytes.NewReader(valid[:n])); err == nil {
			t.Fatalf("prefix of %d bytes accepted", n)
		}
		if _, err := Read(iotest.HalfReader(bytes.NewBuffer(valid[:n]))); err == nil {
			t.Fatalf("streamed prefix of %d bytes accepted", n)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(path, []byte("just some text"), 0o644)
	_, err := Open(path)
	if !errors.Is(err, ErrNotGGUF) || !strings.Contains(err.Error(), path) {
		t.Errorf("text file: %v", err)
	}
}

func TestModelDigest(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, tail byte, n int) string {
		w := NewWriter()
		w.Set("general.name", "m")
		data := make([]byte, 4*n)
		data[len(data)-1] = tail
		w.AddTensor(Tensor{Name: "t", Shape: []uint64{uint64(n)}, Type: F32, Data: data})
		path := filepath.Join(dir, name)
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	digest := func(path string) string {
		d, err := ModelDigest(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(d) != 64 {
			t.Fatalf("digest %q is not 64 hex digits", d)
		}
		return d
	}
	big := 1 << 20 // 4 MiB of data: the middle is not read
	a := write("a", 1, big)
	if digest(a) != digest(a) {
		t.Error("same file, different digests")
	}
	if digest(a) == digest(write("b", 2, big)) {
		t.Error("last data byte changed, digest did not")
	}
	if digest(write("c", 1, 8)) == digest(write("d", 2, 8)) {
		t.Error("small file: data changed, digest did not")
	}
	// A change in the middle of a large file is, by design, not seen.
	raw, _ := os.ReadFile(a)
	raw[len(raw)/2] ^= 0xff
	mid := filepath.Join(dir, "mid")
	os.WriteFile(mid, raw, 0o644)
	if digest(mid) != digest(a) {
		t.Error("digest read the middle of the data region")
	}
	if _, err := ModelDigest(filepath.Join(dir, "nope")); err == nil {
		t.Error("missing file digested")
	}
}

func FuzzRead(f *testing.F) {
	valid, _ := sampleFile(f)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(header(3, 0, 0))
	f.Add(header(2, 1, 1))
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range []io.Reader{bytes.NewReader(data), iotest.HalfReader(bytes.NewBuffer(data))} {
			file, err := Read(r)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "gguf: ") {
					t.Fatalf("error without prefix: %v", err)
				}
				continue
			}
			if file.Alignment == 0 || file.Alignment&(file.Alignment-1) != 0 {
				t.Fatalf("alignment %d accepted", file.Alignment)
			}
			if file.DataOffset < file.HeaderSize || file.HeaderSize > int64(len(data)) {
				t.Fatalf("header %d, data offset %d, input %d", file.HeaderSize, file.DataOffset, len(data))
			}
			// Whatever parses must survive a rewrite: writing the metadata,
			// reading it back and writing it again gives the same bytes.
			first := rewrite(t, file.KVs)
			again, err := Read(bytes.NewReader(first))
			if err != nil {
				t.Fatalf("reread: %v", err)
			}
			if !bytes.Equal(rewrite(t, again.KVs), first) {
				t.Fatal("metadata changed in a rewrite")
			}
		}
	})
}

func rewrite(t *testing.T, kvs []KV) []byte {
	w := NewWriter()
	for _, kv := range kvs {
		w.SetValue(kv.Key, kv.Value)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	return buf.Bytes()
}
