package cgo

/*
#include <stdint.h>
#include "superfluid.h"
extern void sfGoStep(uintptr_t user, uint32_t n_tokens, uint32_t n_top);
*/
import "C"

import (
	"runtime/cgo"

	"superfluid/engine"
)

var _ engine.StepReporter = (*Engine)(nil)

// SetStepHook makes every step of a tick report the tokens sampled so far
// (see engine.StepReporter). Owner goroutine only, between ticks.
func (e *Engine) SetStepHook(hook func(ev *engine.Events)) {
	if e.handle != 0 {
		e.handle.Delete()
		e.handle = 0
	}
	e.stepHook = hook
	if hook == nil {
		e.cevents.on_step, e.cevents.step_user = nil, 0
		return
	}
	e.handle = cgo.NewHandle(e)
	e.cevents.on_step = C.sf_step_fn(C.sfGoStep)
	e.cevents.step_user = C.uintptr_t(e.handle)
}

// sfGoStep runs the hook from inside sf_tick. A panic must not unwind
// through the C frames below it (their cleanup would never run and the
// engine would be left mid-step), so it is recovered here: the tick is
// stopped at its next step boundary through the yield word and Tick
// returns the panic as an error.
//
//export sfGoStep
func sfGoStep(user C.uintptr_t, nTokens, nTop C.uint32_t) {
	e := cgo.Handle(user).Value().(*Engine)
	defer func() {
		if r := recover(); r != nil {
			e.stepPanic = r
			e.yield.Store(1)
		}
	}()
	if e.stepPanic != nil {
		return // an earlier step's hook panicked; the tick is stopping
	}
	ev := &e.stepEvents
	ev.Tokens = e.tokens[:nTokens]
	ev.Top = e.top[:nTop]
	ev.Lanes = nil
	e.stepHook(ev)
}
