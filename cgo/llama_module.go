//go:build sfmodule

package cgo

import (
	// llama.cpp and ggml with its CPU backend, compiled by cgo from the
	// sources the Go module vendors (llama.cpp ec98e2002): the offline
	// fallback (make ENGINE=module), which needs nothing but the Go module
	// cache.
	_ "github.com/ollama/ollama/llama/llama.cpp/src"
	_ "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
)

// upstreamLlama says which route this build took (tests check the
// architectures each knows).
const upstreamLlama = false

// engineFallback is logged as a warning when the first engine opens: a
// binary of this route is slower and older than a user would expect.
const engineFallback = "this binary was built with the offline fallback engine (make ENGINE=module): " +
	"llama.cpp ec98e2002 of December 2025, one AVX2 CPU build, about half the current engine's prefill speed, " +
	"no Qwen3.5, Gemma 4 or later architectures; plain make builds the current llama.cpp"
