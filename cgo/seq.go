package cgo

/*
#include "superfluid.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// CopyPrefix makes dst hold the first n tokens of src. With the unified KV
// cache the cells are shared, not copied.
func (e *Engine) CopyPrefix(src, dst int32, n int) error {
	if e.e == nil {
		return errClosed
	}
	return e.err("copy", C.sf_seq_copy(e.e, C.int32_t(src), C.int32_t(dst), C.int32_t(n)))
}

// Truncate keeps the first keep tokens of seq.
func (e *Engine) Truncate(seq int32, keep int) error {
	if e.e == nil {
		return errClosed
	}
	return e.err("truncate", C.sf_seq_truncate(e.e, C.int32_t(seq), C.int32_t(keep)))
}

// Free empties seq.
func (e *Engine) Free(seq int32) error {
	if e.e == nil {
		return errClosed
	}
	return e.err("free", C.sf_seq_free(e.e, C.int32_t(seq)))
}

// SeqLen is the number of tokens seq holds, or -1 for a bad sequence.
func (e *Engine) SeqLen(seq int32) int {
	if e.e == nil {
		return -1
	}
	return int(C.sf_seq_length(e.e, C.int32_t(seq)))
}

// Export appends seq's state (a self-describing blob) to dst.
func (e *Engine) Export(seq int32, dst []byte) ([]byte, error) {
	if e.e == nil {
		return dst, errClosed
	}
	var needed C.size_t
	if rc := C.sf_seq_export(e.e, C.int32_t(seq), nil, 0, &needed); rc != C.SF_ERR_BUFFER {
		return dst, e.err("export", rc)
	}
	start := len(dst)
	dst = append(dst, make([]byte, int(needed))...)
	out := dst[start:]
	rc := C.sf_seq_export(e.e, C.int32_t(seq), (*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &needed)
	if rc != C.SF_OK {
		return dst[:start], e.err("export", rc)
	}
	return dst[:start+int(needed)], nil
}

// Import replaces seq's contents with exported state; it refuses state from
// another model, another KV type, or damaged bytes.
func (e *Engine) Import(seq int32, data []byte) (int, error) {
	if e.e == nil {
		return 0, errClosed
	}
	var ptr *C.uint8_t
	if len(data) > 0 {
		ptr = (*C.uint8_t)(unsafe.Pointer(&data[0]))
	}
	var n C.int32_t
	if err := e.err("import", C.sf_seq_import(e.e, C.int32_t(seq), ptr, C.size_t(len(data)), &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// PlainDecodeLoop runs the C baseline the tick is benchmarked against and
// returns the nanoseconds its decode rounds took.
func (e *Engine) PlainDecodeLoop(lanes, promptLen, rounds int) (int64, error) {
	if e.e == nil {
		return 0, errClosed
	}
	ns := int64(C.sf_bench_plain_decode(e.e, C.int32_t(lanes), C.int32_t(promptLen), C.int32_t(rounds)))
	if ns < 0 {
		return 0, fmt.Errorf("cgo: plain decode loop failed with status %d", -ns)
	}
	return ns, nil
}

// PlainPrefill decodes a promptLen-token prompt into sequence 0 with one
// llama_decode call and returns the nanoseconds it took: the raw engine a
// prefill tick is measured against. Sequence 0 must be free.
func (e *Engine) PlainPrefill(promptLen int) (int64, error) {
	if e.e == nil {
		return 0, errClosed
	}
	ns := int64(C.sf_bench_plain_prefill(e.e, C.int32_t(promptLen)))
	if ns < 0 {
		return 0, fmt.Errorf("cgo: plain prefill failed with status %d", -ns)
	}
	return ns, nil
}
