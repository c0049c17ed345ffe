//go:build !sfmodule

package cgo

// The default build (make): llama.cpp and ggml come from a current upstream
// source tree, pinned by the Makefile, that build/llama.mk compiled into
// static archives; the Makefile passes them in CGO_LDFLAGS, with the tree's
// headers, SF_LLAMA_UPSTREAM=1 and the commit in CGO_CPPFLAGS.

// upstreamLlama says which route this build took (tests check the
// architectures each knows).
const upstreamLlama = true

// engineFallback is empty: this is the current engine.
const engineFallback = ""
