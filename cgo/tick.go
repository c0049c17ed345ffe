package cgo

/*
#include "superfluid.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"superfluid/engine"
)

// The engine package's records mirror the C structs so that plans and events
// cross without copying. These constants fail to compile if a size drifts.
const (
	_ = uintptr(C.sizeof_sf_admit - unsafe.Sizeof(engine.Admit{}))
	_ = uintptr(unsafe.Sizeof(engine.Admit{}) - C.sizeof_sf_admit)
	_ = uintptr(C.sizeof_sf_sampling - unsafe.Sizeof(engine.Sampling{}))
	_ = uintptr(unsafe.Sizeof(engine.Sampling{}) - C.sizeof_sf_sampling)
	_ = uintptr(C.sizeof_sf_prefill - unsafe.Sizeof(engine.Prefill{}))
	_ = uintptr(unsafe.Sizeof(engine.Prefill{}) - C.sizeof_sf_prefill)
	_ = uintptr(C.sizeof_sf_decode - unsafe.Sizeof(engine.Decode{}))
	_ = uintptr(unsafe.Sizeof(engine.Decode{}) - C.sizeof_sf_decode)
	_ = uintptr(C.sizeof_sf_logit_bias - unsafe.Sizeof(engine.LogitBias{}))
	_ = uintptr(unsafe.Sizeof(engine.LogitBias{}) - C.sizeof_sf_logit_bias)
	_ = uintptr(C.sizeof_sf_token_event - unsafe.Sizeof(engine.TokenEvent{}))
	_ = uintptr(unsafe.Sizeof(engine.TokenEvent{}) - C.sizeof_sf_token_event)
	_ = uintptr(C.sizeof_sf_top_logprob - unsafe.Sizeof(engine.TopLogprob{}))
	_ = uintptr(unsafe.Sizeof(engine.TopLogprob{}) - C.sizeof_sf_top_logprob)
	_ = uintptr(C.sizeof_sf_lane_event - unsafe.Sizeof(engine.LaneEvent{}))
	_ = uintptr(unsafe.Sizeof(engine.LaneEvent{}) - C.sizeof_sf_lane_event)
	_ = uintptr(C.sizeof_sf_timings - unsafe.Sizeof(engine.Timings{}))
	_ = uintptr(unsafe.Sizeof(engine.Timings{}) - C.sizeof_sf_timings)
)

// Tick carries out one plan: one engine step. The returned events belong to the engine until
// the next Tick. Steady state (no arena growth) allocates nothing.
func (e *Engine) Tick(p *engine.Plan) (*engine.Events, error) {
	if e.e == nil {
		return nil, errClosed
	}
	// A step samples at most one token per prefill chunk and decode, and
	// one per draft token.
	need := len(p.Prefills) + len(p.Decodes)
	for i := range p.Decodes {
		need += int(p.Decodes[i].DraftLen)
	}
	if need > len(e.tokens) {
		e.growEvents(need)
	}
	cp := e.cplan
	cp.retires = (*C.uint32_t)(pinSlice(&e.pinner, p.Retires))
	cp.n_retires = C.uint32_t(len(p.Retires))
	cp.admits = (*C.sf_admit)(pinSlice(&e.pinner, p.Admits))
	cp.n_admits = C.uint32_t(len(p.Admits))
	cp.prefills = (*C.sf_prefill)(pinSlice(&e.pinner, p.Prefills))
	cp.n_prefills = C.uint32_t(len(p.Prefills))
	cp.decodes = (*C.sf_decode)(pinSlice(&e.pinner, p.Decodes))
	cp.n_decodes = C.uint32_t(len(p.Decodes))
	cp.tokens = (*C.int32_t)(pinSlice(&e.pinner, p.Tokens))
	cp.n_tokens = C.uint32_t(len(p.Tokens))
	cp.biases = (*C.sf_logit_bias)(pinSlice(&e.pinner, p.Biases))
	cp.n_biases = C.uint32_t(len(p.Biases))
	cp.lora_scales = (*C.float)(pinSlice(&e.pinner, p.LoRA))
	cp.n_lora_scales = C.uint32_t(len(p.LoRA))

	ce := e.cevents
	ce.tokens = (*C.sf_token_event)(pinSlice(&e.pinner, e.tokens))
	ce.cap_tokens = C.uint32_t(len(e.tokens))
	ce.top = (*C.sf_top_logprob)(pinSlice(&e.pinner, e.top))
	ce.cap_top = C.uint32_t(len(e.top))
	ce.lanes = (*C.sf_lane_event)(pinSlice(&e.pinner, e.lanes))
	ce.cap_lanes = C.uint32_t(len(e.lanes))

	rc := C.sf_tick(e.e, cp, ce)
	e.pinner.Unpin()
	clearPlanPointers(cp, ce)

	ev := &e.events
	ev.Tokens = e.tokens[:ce.n_tokens]
	ev.Top = e.top[:ce.n_top]
	ev.Lanes = e.lanes[:ce.n_lanes]
	ev.Timings = *(*engine.Timings)(unsafe.Pointer(&ce.timings))
	return ev, e.tickErr(rc)
}

// tickErr is a failed tick's error, naming the lane the engine blames.
func (e *Engine) tickErr(rc C.int) error {
	if rc == C.SF_OK {
		return nil
	}
	err := &engine.Error{Status: engine.Status(rc), Op: "tick", Msg: C.GoString(C.sf_last_error(e.e))}
	if e.cevents.has_fault_lane != 0 {
		err.Lane, err.HasLane = uint32(e.cevents.fault_lane), true
	}
	return err
}

// clearPlanPointers drops the Go pointers from the C headers once the call
// is over, so no stale pointer to unpinned memory outlives it.
func clearPlanPointers(cp *C.sf_plan, ce *C.sf_events) {
	cp.retires, cp.admits, cp.prefills, cp.decodes, cp.tokens, cp.biases = nil, nil, nil, nil, nil, nil
	cp.lora_scales = nil
	ce.tokens, ce.top, ce.lanes = nil, nil, nil
}

// pinSlice pins s's backing array for the call and returns its address, or
// nil for an empty slice.
func pinSlice[T any](p *runtime.Pinner, s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	p.Pin(&s[0])
	return unsafe.Pointer(&s[0])
}

// growEvents sizes the event arrays for a step that may sample n tokens.
func (e *Engine) growEvents(n int) {
	n = max(n, 64)
	e.tokens = make([]engine.TokenEvent, n)
	e.top = make([]engine.TopLogprob, n*engine.MaxLogprobs)
	e.lanes = make([]engine.LaneEvent, max(e.desc.Lanes, 1))
}
