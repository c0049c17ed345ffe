package cgo

/*
#include "superfluid.h"
*/
import "C"

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"superfluid/engine"
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
	return e.exportBlob("export", dst, func(out *C.uint8_t, cap C.size_t, needed *C.size_t) C.int {
		return C.sf_seq_export(e.e, C.int32_t(seq), out, cap, needed)
	})
}

// Import replaces seq's contents with exported state; it refuses state from
// another model, another KV type, or damaged bytes.
func (e *Engine) Import(seq int32, data []byte) (int, error) {
	return e.importBlob("import", data, func(in *C.uint8_t, n C.size_t, tokens *C.int32_t) C.int {
		return C.sf_seq_import(e.e, C.int32_t(seq), in, n, tokens)
	})
}

// ExportTail appends the state of seq's tokens from from on (a tail blob)
// to dst; only a full-attention model's engine has tails.
func (e *Engine) ExportTail(seq int32, from int, dst []byte) ([]byte, error) {
	if from < 1 || from > math.MaxInt32 {
		return dst, fmt.Errorf("cgo: export tail: a tail from %d", from)
	}
	return e.exportBlob("export tail", dst, func(out *C.uint8_t, cap C.size_t, needed *C.size_t) C.int {
		return C.sf_seq_export_tail(e.e, C.int32_t(seq), C.int32_t(from), out, cap, needed)
	})
}

// ImportTail appends a tail blob to seq, which holds exactly the tokens
// before it, and returns the tokens seq holds; on failure seq keeps those.
func (e *Engine) ImportTail(seq int32, data []byte) (int, error) {
	return e.importBlob("import tail", data, func(in *C.uint8_t, n C.size_t, tokens *C.int32_t) C.int {
		return C.sf_seq_import_tail(e.e, C.int32_t(seq), in, n, tokens)
	})
}

// exportBlob appends what an export call writes to dst: the call is asked
// for its size first (SF_ERR_BUFFER with nothing written), then given the
// room.
func (e *Engine) exportBlob(op string, dst []byte, export func(out *C.uint8_t, cap C.size_t, needed *C.size_t) C.int) ([]byte, error) {
	if e.e == nil {
		return dst, errClosed
	}
	var needed C.size_t
	if rc := export(nil, 0, &needed); rc != C.SF_ERR_BUFFER {
		return dst, e.err(op, rc)
	}
	start := len(dst)
	dst = append(dst, make([]byte, int(needed))...)
	out := dst[start:]
	if rc := export((*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &needed); rc != C.SF_OK {
		return dst[:start], e.err(op, rc)
	}
	return dst[:start+int(needed)], nil
}

// importBlob hands data to an import call and returns the tokens the
// sequence holds after it.
func (e *Engine) importBlob(op string, data []byte, imp func(in *C.uint8_t, n C.size_t, tokens *C.int32_t) C.int) (int, error) {
	if e.e == nil {
		return 0, errClosed
	}
	var ptr *C.uint8_t
	if len(data) > 0 {
		ptr = (*C.uint8_t)(unsafe.Pointer(&data[0]))
	}
	var n C.int32_t
	if err := e.err(op, imp(ptr, C.size_t(len(data)), &n)); err != nil {
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

func partialOf(p C.int32_t) engine.Partial {
	switch p {
	case C.SF_PARTIAL_SWA:
		return engine.PartialSWA
	case C.SF_PARTIAL_RECURRENT:
		return engine.PartialRecurrent
	}
	return engine.PartialNone
}

var _ engine.PartialCuts = (*Engine)(nil)

// MinCut is the shortest length seq may be cut or copied to with its
// state whole (engine.PartialCuts); -1 for a bad sequence.
func (e *Engine) MinCut(seq int32) int {
	if e.e == nil {
		return -1
	}
	return int(C.sf_seq_min_cut(e.e, C.int32_t(seq)))
}

// CheckpointPositions lists the positions of the checkpoints the engine
// took of seq, ascending (engine.PartialCuts).
func (e *Engine) CheckpointPositions(seq int32) ([]int, error) {
	if e.e == nil {
		return nil, errClosed
	}
	var n C.int32_t
	if err := e.err("checkpoints", C.sf_seq_checkpoints(e.e, C.int32_t(seq), nil, 0, &n)); err != nil || n == 0 {
		return nil, err
	}
	pos := make([]int32, int(n))
	if err := e.err("checkpoints", C.sf_seq_checkpoints(e.e, C.int32_t(seq), (*C.int32_t)(unsafe.Pointer(&pos[0])), n, &n)); err != nil {
		return nil, err
	}
	out := make([]int, len(pos))
	for i, p := range pos {
		out[i] = int(p)
	}
	return out, nil
}

// TakeCheckpoints copies out seq's checkpoints at the positions want
// names and drops all of seq's checkpoints from the engine: only the
// chosen blobs (up to CheckpointMax of 1–4.5 MB each) cross into Go.
func (e *Engine) TakeCheckpoints(seq int32, want []int) ([]engine.Checkpoint, error) {
	pos, err := e.CheckpointPositions(seq)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Checkpoint, 0, len(want))
	for i, p := range pos {
		if !slices.Contains(want, p) {
			continue
		}
		var needed C.size_t
		if rc := C.sf_seq_checkpoint_get(e.e, C.int32_t(seq), C.int32_t(i), nil, 0, &needed); rc != C.SF_ERR_BUFFER {
			return nil, e.err("checkpoint", rc)
		}
		blob := make([]byte, int(needed))
		if err := e.err("checkpoint", C.sf_seq_checkpoint_get(e.e, C.int32_t(seq), C.int32_t(i), (*C.uint8_t)(unsafe.Pointer(&blob[0])), needed, &needed)); err != nil {
			return nil, err
		}
		out = append(out, engine.Checkpoint{Pos: p, Blob: blob})
	}
	return out, e.err("checkpoints clear", C.sf_seq_checkpoints_clear(e.e, C.int32_t(seq)))
}

// RestoreCheckpoint resumes seq at cp.Pos (engine.PartialCuts).
func (e *Engine) RestoreCheckpoint(seq int32, cp engine.Checkpoint) error {
	if e.e == nil {
		return errClosed
	}
	var ptr *C.uint8_t
	if len(cp.Blob) > 0 {
		ptr = (*C.uint8_t)(unsafe.Pointer(&cp.Blob[0]))
	}
	return e.err("restore checkpoint", C.sf_seq_restore_checkpoint(e.e, C.int32_t(seq), C.int32_t(cp.Pos), ptr, C.size_t(len(cp.Blob))))
}

// RollbacksSettled counts the rolled-back recurrent states (a rejected
// draft's cut, which llama.cpp applies at the sequence's next decode) that
// a copy settled into its source's current state first.
func (e *Engine) RollbacksSettled() uint64 {
	if e.e == nil {
		return 0
	}
	return uint64(C.sf_rollbacks_settled(e.e))
}
