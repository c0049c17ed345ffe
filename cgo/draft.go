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

	pinner runtime.Pinner
	reqs   []draftReq
	tokens []engine.Token
	out    []engine.Token
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
	d.reqs, d.tokens = d.reqs[:0], d.tokens[:0]
	outs := 0
	for i := range reqs {
		r := &reqs[i]
		r.Draft = nil
		if len(r.History) == 0 || r.Max <= 0 {
			continue
		}
		d.reqs = append(d.reqs, draftReq{lane: r.Lane, histOff: uint32(len(d.tokens)), histLen: uint32(len(r.History)),
			max: uint32(r.Max), outOff: uint32(outs)})
		d.tokens = append(d.tokens, r.History...)
		outs += r.Max
	}
	if len(d.reqs) == 0 {
		return 0, nil
	}
	if outs > len(d.out) {
		d.out = make([]engine.Token, outs)
	}
	start := time.Now()
	rc := C.sf_draft(d.eng.e, (*C.sf_draft_req)(pinSlice(&d.pinner, d.reqs)), C.uint32_t(len(d.reqs)),
		(*C.int32_t)(pinSlice(&d.pinner, d.tokens)), C.uint32_t(len(d.tokens)),
		(*C.int32_t)(pinSlice(&d.pinner, d.out)), C.uint32_t(len(d.out)), C.int32_t(d.targetVocab), C.float(d.pMin))
	d.pinner.Unpin()
	took := time.Since(start)
	if rc != C.SF_OK {
		return took, d.eng.err("draft", rc)
	}
	k := 0
	for i := range reqs {
		r := &reqs[i]
		if len(r.History) == 0 || r.Max <= 0 {
			continue
		}
		q := d.reqs[k]
		k++
		r.Draft = d.out[q.outOff : q.outOff+q.outLen : q.outOff+q.outLen]
	}
	return took, nil
}
