package gguf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Errors returned (wrapped) by the reader; test for them with errors.Is.
var (
	// ErrNotGGUF means the input does not start with the GGUF magic.
	ErrNotGGUF = errors.New("not a GGUF file")
	// ErrUnsupportedVersion means a GGUF version other than 2 or 3.
	ErrUnsupportedVersion = errors.New("unsupported GGUF version")
	// ErrTruncated means the input ends before the structure it describes,
	// including lengths and counts larger than what is left of the file.
	ErrTruncated = errors.New("truncated file")
	// ErrCorrupt means a structurally invalid file: unknown value types,
	// too many dimensions, bad alignment, misplaced tensor data.
	ErrCorrupt = errors.New("corrupt file")
)

// maxNesting bounds nested arrays so a hostile file cannot recurse deeply.
const maxNesting = 8

// chunk bounds allocations made on the strength of a length field when the
// input size is not known: buffers grow as bytes actually arrive instead of
// being sized up front.
const chunk = 1 << 16

// File is the parsed header of a GGUF file. Tensor data is not loaded: it
// starts at DataOffset, each tensor at DataOffset+TensorInfo.Offset. A File
// returned by Open or Read may be read from several goroutines.
type File struct {
	Version   uint32
	KVs       []KV
	Tensors   []TensorInfo
	Alignment uint64
	// HeaderSize is the number of bytes of header, metadata and tensor
	// descriptors, before the padding that precedes the data.
	HeaderSize int64
	// DataOffset is where the tensor data region starts.
	DataOffset int64
	// Size is the total input size, or -1 when it could not be determined.
	Size int64

	index map[string]int
}

// TensorInfo describes one tensor. Dims are in ggml order: Dims[0] (ne0)
// is the contiguous dimension.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   GGMLType
	Offset uint64 // relative to File.DataOffset
}

// Elements is the number of values in the tensor.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the size of the tensor's data.
func (t TensorInfo) Bytes() (uint64, error) {
	return t.Type.RowBytes(t.Elements())
}

// Open reads the header of the GGUF file at path.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	f, err := decode(fh)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	return f, nil
}

// Read parses a GGUF header from r, reading no further than the end of the
// tensor descriptors. When r is also an io.Seeker (files, bytes.Reader …)
// its size bounds every length read and the tensors are checked to lie
// inside it.
func Read(r io.Reader) (*File, error) {
	f, err := decode(r)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return f, nil
}

// remainingSize reports how many bytes r has left, or -1 if unknown.
func remainingSize(r io.Reader) int64 {
	s, ok := r.(io.Seeker)
	if !ok {
		return -1
	}
	cur, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	end, err := s.Seek(0, io.SeekEnd)
	if err != nil {
		return -1
	}
	if _, err := s.Seek(cur, io.SeekStart); err != nil {
		return -1
	}
	return end - cur
}

// decode parses everything up to the tensor data; errors carry no prefix,
// Open and Read add it.
func decode(r io.Reader) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16), size: remainingSize(r)}
	f := &File{Size: d.size, Alignment: DefaultAlignment}
	nTensors, nKV, err := d.header(f)
	if err != nil {
		return nil, err
	}
	if err := d.metadata(f, nKV); err != nil {
		return nil, err
	}
	f.Tensors = make([]TensorInfo, 0, min(nTensors, chunk))
	for i := uint64(0); i < nTensors; i++ {
		t, err := d.tensorInfo()
		if err != nil {
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		f.Tensors = append(f.Tensors, t)
	}
	f.HeaderSize = d.pos
	f.DataOffset = int64(alignUp(uint64(d.pos), f.Alignment))
	if err := f.checkTensors(); err != nil {
		return nil, err
	}
	return f, nil
}

// header reads the magic, the version and the two counts.
func (d *decoder) header(f *File) (nTensors, nKV uint64, err error) {
	magic, err := d.bytes(4, "magic")
	if err != nil {
		if errors.Is(err, ErrTruncated) {
			return 0, 0, fmt.Errorf("%w (shorter than the 4-byte magic)", ErrNotGGUF)
		}
		return 0, 0, err
	}
	if string(magic) != Magic {
		return 0, 0, fmt.Errorf("%w (starts with %q, want %q)", ErrNotGGUF, magic, Magic)
	}
	if f.Version, err = d.u32("version"); err != nil {
		return 0, 0, err
	}
	if f.Version != 2 && f.Version != 3 {
		return 0, 0, fmt.Errorf("%w %d (supported: 2, 3)", ErrUnsupportedVersion, f.Version)
	}
	// Each tensor descriptor and key/value takes at least this many bytes.
	if nTensors, err = d.count("tensor count", 8+4+4+8); err != nil {
		return 0, 0, err
	}
	if nKV, err = d.count("metadata count", 8+4+1); err != nil {
		return 0, 0, err
	}
	return nTensors, nKV, nil
}

// metadata reads n key/value pairs and applies general.alignment.
func (d *decoder) metadata(f *File, n uint64) error {
	f.KVs = make([]KV, 0, min(n, chunk))
	f.index = make(map[string]int, min(n, chunk))
	for i := uint64(0); i < n; i++ {
		key, err := d.str("metadata key")
		if err != nil {
			return fmt.Errorf("metadata %d: %w", i, err)
		}
		if _, dup := f.index[key]; dup {
			return fmt.Errorf("%w: duplicate metadata key %q", ErrCorrupt, key)
		}
		t, err := d.u32("value type")
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		f.index[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}
	if v, ok := f.Value(KeyAlignment); ok {
		a, ok := v.Uint()
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			return fmt.Errorf("%w: %s = %v is not a power of two", ErrCorrupt, KeyAlignment, v.Any())
		}
		f.Alignment = a
	}
	return nil
}

// checkTensors validates tensor placement: aligned offsets and, when the
// file size is known, data that lies inside the file.
func (f *File) checkTensors() error {
	seen := make(map[string]bool, len(f.Tensors))
	for _, t := range f.Tensors {
		if seen[t.Name] {
			return fmt.Errorf("%w: duplicate tensor %q", ErrCorrupt, t.Name)
		}
		seen[t.Name] = true
		if t.Offset%f.Alignment != 0 {
			return fmt.Errorf("%w: tensor %q offset %d is not a multiple of the alignment %d", ErrCorrupt, t.Name, t.Offset, f.Alignment)
		}
		if f.Size < 0 || !t.Type.Known() {
			continue
		}
		n, err := t.Bytes()
		if err != nil {
			return fmt.Errorf("%w: tensor %q: %v", ErrCorrupt, t.Name, err)
		}
		end := uint64(f.DataOffset) + t.Offset + n
		if t.Offset > math.MaxInt64 || n > math.MaxInt64 || end < t.Offset || end > uint64(f.Size) {
			return fmt.Errorf("%w: tensor %q data (%d bytes at data offset %d) extends past the end of the %d-byte file", ErrTruncated, t.Name, n, t.Offset, f.Size)
		}
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }
