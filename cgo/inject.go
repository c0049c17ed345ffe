package cgo

/*
#include "superfluid.h"
*/
import "C"

// Test support: cgo cannot be used in _test.go files, so the package's
// tests reach the native exception injection through these.

// injectTickException makes the next tick throw std::bad_alloc while it
// validates its first admission.
func (e *Engine) injectTickException() { C.sf_inject_exception(e.e, C.SF_INJECT_TICK) }

// injectTokenizeException makes the next tokenize throw std::runtime_error.
func (e *Engine) injectTokenizeException() { C.sf_inject_exception(e.e, C.SF_INJECT_TOKENIZE) }
