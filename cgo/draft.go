package cgo

/*
#include <stdlib.h>
#include "superfluid.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"superfluid/engine"
)

// draftReq mirrors C.sf_draft_req.
type draftReq struct {
	lane, histOff, histLen, max, outOff, outLen uint32
}

const (
	_ = uintptr(C.sizeof_sf_draft_req - unsafe.Sizeof(draftReq{}))
	_ = uintptr(unsafe.Sizeof(draftReq{}) - C.sizeof_sf_draft_req)
)

// CheckDraftVocab refuses a draft model whose vocabulary is not the
// target's, compared as llama.cpp's speculative decoding compares them;
// the error names the first difference.
func CheckDraftVocab(target, draft *Engine) error {
	if target.e == nil || draft.e == nil {
		return errClosed
	}
	var buf [256]C.char
	if rc := C.sf_draft_compatible(target.e, draft.e, &buf[0], C.int32_t(len(buf))); rc != C.SF_OK {
		return &engine.Error{Status: engine.Status(rc), Op: "draft", Msg: C.GoString(&buf[0])}
	}
	return nil
}

// Drafter drafts with an engine on a small model for a target engine's
// lanes (engine.Drafter): greedily, batched across the lanes, each lane
// in a sequence of its own that follows the lane's history.
type Drafter struct {
	eng         *Engine
	targetVocab int
	pMin        float32
	bufs        draftBufs
}

var _ engine.Drafter = (*Drafter)(nil)

// NewDrafter drafts with eng (opened on the draft model, with a sequence
// per lane it drafts for and no other use) for target, whose vocabulary
// it must share (CheckDraftVocab). A draft token whose probability under
// the draft model is below pMin ends the draft (llama-server's
// --spec-draft-p-min; 0: never).
func NewDrafter(eng, target *Engine, pMin float32) (*Drafter, error) {
	if d := eng.Descriptor(); d.Pooling != engine.PoolingNone || d.Partial != engine.PartialNone {
		return nil, fmt.Errorf("cgo: a draft model must generate and be cut back anywhere (an embedding, recurrent, hybrid or sliding-window model cannot)")
	}
	if err := CheckDraftVocab(target, eng); err != nil {
		return nil, err
	}
	if !(pMin >= 0 && pMin <= 1) {
		return nil, fmt.Errorf("cgo: draft minimum probability %v outside [0, 1]", pMin)
	}
	return &Drafter{eng: eng, targetVocab: target.desc.Vocab, pMin: pMin}, nil
}

// Engine is the draft model's engine.
func (d *Drafter) Engine() *Engine { return d.eng }

// Draft implements engine.Drafter.
func (d *Drafter) Draft(reqs []engine.DraftRequest) (time.Duration, error) {
	if d.eng.e == nil {
		return 0, errClosed
	}
	return d.bufs.run(d.eng, reqs, func(r *C.sf_draft_req, n C.uint32_t, tok *C.int32_t, nTok C.uint32_t, out *C.int32_t, cap C.uint32_t) C.int {
		return C.sf_draft(d.eng.e, r, n, tok, nTok, out, cap, C.int32_t(d.targetVocab), C.float(d.pMin))
	})
}

// draftBufs lays a call's requests out for the engine (every draft
// source's C call takes the same arrays) and reads the drafts back.
type draftBufs struct {
	pinner runtime.Pinner
	reqs   []draftReq
	tokens []engine.Token
	out    []engine.Token
}

// run fills reqs' drafts through call, timing it; eng reports its error.
func (b *draftBufs) run(eng *Engine, reqs []engine.DraftRequest,
	call func(*C.sf_draft_req, C.uint32_t, *C.int32_t, C.uint32_t, *C.int32_t, C.uint32_t) C.int) (time.Duration, error) {
	b.reqs, b.tokens = b.reqs[:0], b.tokens[:0]
	outs := 0
	for i := range reqs {
		r := &reqs[i]
		r.Draft = nil
		if len(r.History) == 0 || r.Max <= 0 {
			continue
		}
		b.reqs = append(b.reqs, draftReq{lane: r.Lane, histOff: uint32(len(b.tokens)), histLen: uint32(len(r.History)),
			max: uint32(r.Max), outOff: uint32(outs)})
		b.tokens = append(b.tokens, r.History...)
		outs += r.Max
	}
	if len(b.reqs) == 0 {
		return 0, nil
	}
	if outs > len(b.out) {
		b.out = make([]engine.Token, outs)
	}
	start := time.Now()
	rc := call((*C.sf_draft_req)(pinSlice(&b.pinner, b.reqs)), C.uint32_t(len(b.reqs)),
		(*C.int32_t)(pinSlice(&b.pinner, b.tokens)), C.uint32_t(len(b.tokens)),
		(*C.int32_t)(pinSlice(&b.pinner, b.out)), C.uint32_t(len(b.out)))
	b.pinner.Unpin()
	took := time.Since(start)
	if rc != C.SF_OK {
		return took, eng.err("draft", rc)
	}
	k := 0
	for i := range reqs {
		r := &reqs[i]
		if len(r.History) == 0 || r.Max <= 0 {
			continue
		}
		q := b.reqs[k]
		k++
		r.Draft = b.out[q.outOff : q.outOff+q.outLen : q.outOff+q.outLen]
	}
	return took, nil
}

// MTPDrafter drafts for an engine's lanes from the engine's own
// multi-token prediction block (engine.Drafter; Options.MTP): greedily,
// batched across the lanes, from where each lane's last step left the
// block. No second model, no vocabulary to compare.
type MTPDrafter struct {
	eng  *Engine
	pMin float32
	bufs draftBufs
}

var _ engine.Drafter = (*MTPDrafter)(nil)

// NewMTPDrafter drafts from eng's multi-token prediction block; eng must
// have been opened with Options.MTP. pMin as NewDrafter's.
func NewMTPDrafter(eng *Engine, pMin float32) (*MTPDrafter, error) {
	if !(pMin >= 0 && pMin <= 1) {
		return nil, fmt.Errorf("cgo: draft minimum probability %v outside [0, 1]", pMin)
	}
	return &MTPDrafter{eng: eng, pMin: pMin}, nil
}

// Draft implements engine.Drafter.
func (d *MTPDrafter) Draft(reqs []engine.DraftRequest) (time.Duration, error) {
	if d.eng.e == nil {
		return 0, errClosed
	}
	return d.bufs.run(d.eng, reqs, func(r *C.sf_draft_req, n C.uint32_t, tok *C.int32_t, nTok C.uint32_t, out *C.int32_t, cap C.uint32_t) C.int {
		return C.sf_mtp_draft(d.eng.e, r, n, tok, nTok, out, cap, C.float(d.pMin))
	})
}

// MTPState is what the multi-token prediction block of an engine opened
// with Options.MTP holds of sequence seq: the last position whose trunk
// state it keeps and the highest position in its cache (-1: none; rows
// since the lane last drafted wait outside it), for tests.
func (e *Engine) MTPState(seq int32) (fed, cached int32, err error) {
	if e.e == nil {
		return 0, 0, errClosed
	}
	var f, c C.int32_t
	if rc := C.sf_mtp_seq_state(e.e, C.int32_t(seq), &f, &c); rc != C.SF_OK {
		return 0, 0, &engine.Error{Status: engine.Status(rc), Op: "mtp state", Msg: "no multi-token prediction block, or no such sequence"}
	}
	return int32(f), int32(c), nil
}
