//go:build !sfupstream

package cgo

import (
	// llama.cpp and ggml with its CPU backend, compiled by cgo from the
	// sources the Go module vendors (llama.cpp ec98e2002): the default
	// route, which needs nothing but the module proxy.
	_ "github.com/ollama/ollama/llama/llama.cpp/src"
	_ "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
)

// upstreamLlama says which route this build took (tests check the
// architectures each knows).
const upstreamLlama = false
