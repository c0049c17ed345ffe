package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Tensor is a tensor to be written. Shape is in ggml order: Shape[0] (ne0)
// is the contiguous dimension, so a matrix applied to n_embd-vectors with
// m outputs is {n_embd, m}.
type Tensor struct {
	Name  string
	Shape []uint64
	Type  GGMLType
	// Data holds the encoded bytes. When it is nil, Produce is called at
	// write time instead, so large tensors can be generated straight into
	// the file without ever being held in memory whole.
	Data []byte
	// Produce must write exactly Size() bytes to w.
	Produce func(w io.Writer) error
}

// Size is the encoded size of the tensor's data.
func (t Tensor) Size() (uint64, error) {
	n := uint64(1)
	for _, d := range t.Shape {
		if d != 0 && n > math.MaxInt64/d {
			return 0, fmt.Errorf("gguf: tensor %q: shape %v overflows", t.Name, t.Shape)
		}
		n *= d
	}
	if len(t.Shape) > 0 && t.Shape[0]%uint64(max(t.Type.BlockSize(), 1)) != 0 {
		return 0, fmt.Errorf("gguf: tensor %q: ne0 = %d is not a multiple of the %s block size %d", t.Name, t.Shape[0], t.Type, t.Type.BlockSize())
	}
	s, err := t.Type.RowBytes(n)
	if err != nil {
		return 0, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return s, nil
}

// Writer assembles a GGUF file: ordered metadata, then tensors. Errors from
// Set and AddTensor are remembered and returned by WriteTo, so a long run
// of calls needs a single check.
type Writer struct {
	kvs     []KV
	index   map[string]int
	tensors []Tensor
	names   map[string]bool
	err     error
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{index: map[string]int{}, names: map[string]bool{}}
}

// Err returns the first error recorded by Set, SetValue or AddTensor.
func (w *Writer) Err() error { return w.err }

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Set adds metadata key = x (see ValueOf for the accepted Go types). Setting
// an existing key replaces its value and keeps its position.
func (w *Writer) Set(key string, x any) {
	v, err := ValueOf(x)
	if err != nil {
		w.fail(fmt.Errorf("%w (key %q)", err, key))
		return
	}
	w.SetValue(key, v)
}

// SetValue adds or replaces a metadata value, e.g. one copied from a File.
func (w *Writer) SetValue(key string, v Value) {
	if i, ok := w.index[key]; ok {
		w.kvs[i].Value = v
		return
	}
	w.index[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
}

// AddTensor appends a tensor; names must be unique.
func (w *Writer) AddTensor(t Tensor) {
	if w.names[t.Name] {
		w.fail(fmt.Errorf("gguf: duplicate tensor %q", t.Name))
		return
	}
	if len(t.Shape) == 0 || len(t.Shape) > MaxDims {
		w.fail(fmt.Errorf("gguf: tensor %q: %d dimensions (want 1..%d)", t.Name, len(t.Shape), MaxDims))
		return
	}
	size, err := t.Size()
	if err != nil {
		w.fail(err)
		return
	}
	if t.Data != nil && uint64(len(t.Data)) != size {
		w.fail(fmt.Errorf("gguf: tensor %q: %d data bytes, want %d", t.Name, len(t.Data), size))
		return
	}
	if t.Data == nil && t.Produce == nil {
		w.fail(fmt.Errorf("gguf: tensor %q has neither Data nor Produce", t.Name))
		return
	}
	w.names[t.Name] = true
	w.tensors = append(w.tensors, t)
}

// alignment is the general.alignment value if set, else the default.
func (w *Writer) alignment() (uint64, error) {
	i, ok := w.index[KeyAlignment]
	if !ok {
		return DefaultAlignment, nil
	}
	a, ok := w.kvs[i].Value.Uint()
	if !ok || a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("gguf: %s = %v is not a power of two", KeyAlignment, w.kvs[i].Value.Any())
	}
	return a, nil
}

// WriteTo writes the whole file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	align, err := w.alignment()
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	e := &encoder{w: bw}
	e.raw([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	var offset uint64
	for _, t := range w.tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offset)
		size, _ := t.Size() // checked by AddTensor
		offset = alignUp(offset+size, align)
	}
	e.pad(align)
	for _, t := range w.tensors {
		if e.err != nil {
			break
		}
		e.tensor(t)
		e.pad(align)
	}
	if e.err == nil {
		e.err = bw.Flush()
	}
	if e.err != nil {
		return e.n, fmt.Errorf("gguf: writing: %w", e.err)
	}
	return e.n, nil
}

// WriteFile writes the file atomically: into a temporary file in the same
// directory, synced, then renamed over path, so readers (and a crash
// half-way through a 500 MB model) never leave a partial file at path.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = w.WriteTo(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// encoder writes little-endian GGUF primitives, keeping the first error
// and the byte count (needed for padding).
type encoder struct {
	w   io.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.n += int64(n)
	e.err = err
	return n, err
}

func (e *encoder) raw(p []byte) { e.Write(p) }

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.raw(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.raw(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = io.WriteString(e, s)
	}
}

var zeros [256]byte

func (e *encoder) pad(align uint64) {
	for n := alignUp(uint64(e.n), align) - uint64(e.n); n > 0 && e.err == nil; {
		k := min(n, uint64(len(zeros)))
		e.raw(zeros[:k])
		n -= k
	}
}

// tensor writes a tensor's data and checks its length.
func (e *encoder) tensor(t Tensor) {
	size, _ := t.Size()
	start := e.n
	if t.Data != nil {
		e.raw(t.Data)
	} else if err := t.Produce(e); err != nil && e.err == nil {
		e.err = fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if got := e.n - start; e.err == nil && uint64(got) != size {
		e.err = fmt.Errorf("tensor %q: produced %d bytes, want %d", t.Name, got, size)
	}
}

func (e *encoder) value(v Value) {
	e.u32(uint32(v.Type))
	if v.Type == TypeArray {
		e.array(v.v.(Array))
		return
	}
	e.scalar(v.v)
}

func (e *encoder) scalar(x any) {
	switch x := x.(type) {
	case uint8:
		e.raw([]byte{x})
	case int8:
		e.raw([]byte{byte(x)})
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		e.raw([]byte{b})
	case uint16:
		binary.LittleEndian.PutUint16(e.buf[:2], x)
		e.raw(e.buf[:2])
	case int16:
		binary.LittleEndian.PutUint16(e.buf[:2], uint16(x))
		e.raw(e.buf[:2])
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	default:
		if e.err == nil {
			e.err = fmt.Errorf("unsupported scalar %T", x)
		}
	}
}

func (e *encoder) array(a Array) {
	e.u32(uint32(a.Elem))
	e.u64(uint64(a.Len()))
	switch s := a.Values.(type) {
	case []uint8:
		e.raw(s)
	case []string:
		for _, x := range s {
			e.str(x)
		}
	case []Array:
		for _, x := range s {
			e.array(x)
		}
	case []int8:
		each(e, s)
	case []bool:
		each(e, s)
	case []uint16:
		each(e, s)
	case []int16:
		each(e, s)
	case []uint32:
		each(e, s)
	case []int32:
		each(e, s)
	case []float32:
		each(e, s)
	case []uint64:
		each(e, s)
	case []int64:
		each(e, s)
	case []float64:
		each(e, s)
	}
}

func each[T any](e *encoder, s []T) {
	for _, x := range s {
		e.scalar(x)
	}
}

// KVs returns the metadata added so far, in order.
func (w *Writer) KVs() []KV { return append([]KV(nil), w.kvs...) }
