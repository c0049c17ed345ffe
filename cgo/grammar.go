package cgo

/*
#include <stdlib.h>
#include "superfluid.h"
*/
import "C"

import (
	"unsafe"

	"superfluid/engine"
)

var _ engine.Grammars = (*Engine)(nil)

// AcquireGrammar implements engine.Grammars: the spec is checked in Go
// (engine.CheckGrammar), then compiled once by the native engine and
// cached by its digest. Any goroutine, also during a tick.
func (e *Engine) AcquireGrammar(g *engine.GrammarSpec) (engine.GrammarID, error) {
	return e.grammars.AcquireGrammar(g)
}

// ReleaseGrammar implements engine.Grammars.
func (e *Engine) ReleaseGrammar(id engine.GrammarID) { e.grammars.ReleaseGrammar(id) }

// compileGrammar is the cache's compile: check, then sf_grammar_compile.
func (e *Engine) compileGrammar(g *engine.GrammarSpec) (engine.GrammarID, error) {
	if err := engine.CheckGrammar(g); err != nil {
		return 0, err
	}
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e == nil {
		return 0, errClosed
	}
	text := C.CString(g.GBNF)
	defer C.free(unsafe.Pointer(text))
	var root *C.char
	if g.Root != "" {
		root = C.CString(g.Root)
		defer C.free(unsafe.Pointer(root))
	}
	var patterns **C.char
	if n := len(g.TriggerPatterns); n > 0 {
		patterns = (**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		defer C.free(unsafe.Pointer(patterns))
		list := unsafe.Slice(patterns, n)
		for i, p := range g.TriggerPatterns {
			list[i] = C.CString(p)
			defer C.free(unsafe.Pointer(list[i]))
		}
	}
	var tokens *C.int32_t
	if len(g.TriggerTokens) > 0 {
		tokens = (*C.int32_t)(unsafe.Pointer(&g.TriggerTokens[0]))
	}
	lazy := C.int32_t(0)
	if g.Lazy {
		lazy = 1
	}
	var id C.uint32_t
	var errBuf [512]C.char
	rc := C.sf_grammar_compile(e.e, text, root, lazy, patterns, C.int32_t(len(g.TriggerPatterns)), tokens,
		C.int32_t(len(g.TriggerTokens)), &id, &errBuf[0], C.int32_t(len(errBuf)))
	if rc != C.SF_OK {
		return 0, &engine.Error{Status: engine.Status(rc), Op: "grammar", Msg: C.GoString(&errBuf[0])}
	}
	return engine.GrammarID(id), nil
}

// freeGrammar is the cache's free.
func (e *Engine) freeGrammar(id engine.GrammarID) {
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e != nil {
		C.sf_grammar_free(e.e, C.uint32_t(id))
	}
}
