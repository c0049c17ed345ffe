//go:build sfmodule

package e2e

// batchEmbedTolerance bounds how far an input's vector in a batched call
// may be from the same input embedded alone. The Go module's llama.cpp
// computes the same vector within 1e-5 whatever shares the call.
const batchEmbedTolerance = 1e-5
