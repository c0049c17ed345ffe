//go:build sfupstream

package cgo

// Built with -tags sfupstream (make LLAMA_CPP_DIR=...): llama.cpp and ggml
// come from an upstream source tree that build/llama.mk compiled into
// static archives; the Makefile passes them in CGO_LDFLAGS, with the tree's
// headers, SF_LLAMA_UPSTREAM=1 and the commit in CGO_CPPFLAGS.

// upstreamLlama says which route this build took (tests check the
// architectures each knows).
const upstreamLlama = true
