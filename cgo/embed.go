package cgo

/*
#include "superfluid.h"
*/
import "C"

import (
	"slices"
	"unsafe"

	"superfluid/engine"
)

// embedInput mirrors sf_embed_input.
type embedInput struct {
	Off, Len uint32
}

const (
	_ = uintptr(C.sizeof_sf_embed_input - unsafe.Sizeof(embedInput{}))
	_ = uintptr(unsafe.Sizeof(embedInput{}) - C.sizeof_sf_embed_input)
)

var _ engine.Embedder = (*Engine)(nil)

// EmbedLimits are the most inputs (the engine's sequences) and tokens (its
// batch, which is one micro-batch on an embedding engine) one Embed takes.
func (e *Engine) EmbedLimits() (maxInputs, maxTokens int) {
	return e.desc.Seqs, min(e.desc.Batch, e.desc.Ctx)
}

// EmbedDim is the length of one pooled vector.
func (e *Engine) EmbedDim() int { return e.embedDim }

// Embed runs the inputs in one llama_decode and appends their pooled
// vectors to dst. The owner goroutine calls it.
func (e *Engine) Embed(inputs [][]engine.Token, dst []float32) ([]float32, error) {
	if e.e == nil {
		return dst, errClosed
	}
	e.embedTokens = e.embedTokens[:0]
	e.embedInputs = e.embedInputs[:0]
	for _, in := range inputs {
		e.embedInputs = append(e.embedInputs, embedInput{Off: uint32(len(e.embedTokens)), Len: uint32(len(in))})
		e.embedTokens = append(e.embedTokens, in...)
	}
	n := len(inputs) * e.embedDim
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n] // every float is written on success
	out := dst[start:]
	defer e.pinner.Unpin()
	rc := C.sf_embed(e.e,
		(*C.int32_t)(pinSlice(&e.pinner, e.embedTokens)), C.uint32_t(len(e.embedTokens)),
		(*C.sf_embed_input)(pinSlice(&e.pinner, e.embedInputs)), C.uint32_t(len(e.embedInputs)),
		(*C.float)(pinSlice(&e.pinner, out)), C.size_t(len(out)))
	if err := e.err("embed", rc); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// injectEmbedException makes the next Embed throw after its decode.
func (e *Engine) injectEmbedException() { C.sf_inject_exception(e.e, C.SF_INJECT_EMBED) }
