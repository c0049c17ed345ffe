//go:build !sfmodule

package e2e

// batchEmbedTolerance bounds how far an input's vector in a batched call
// may be from the same input embedded alone. Upstream llama.cpp's CPU
// kernels round f16 weights' products differently with the call's shape:
// a 64-input batch against single requests on the tiny f16 model
// (de3ff815e, x86-64-v3, plain attention) differed by at most 2.4e-5
// (mean pooling), 0 (cls) and 1.5e-4 (last), where the Go module's
// llama.cpp stays within 1e-5. Flash attention, which embedding contexts
// turn off for this reason, made it worse still (3e-4 on six inputs).
const batchEmbedTolerance = 5e-4
