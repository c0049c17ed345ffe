//go:build !cuda && !metal

package cgo

// GPUBackend names the GPU backend this binary was built for ("" for CPU).
const GPUBackend = ""

// DefaultBatch is the most tokens one engine step carries unless told
// otherwise. On the CPU a prompt prefills as fast in steps of 64 tokens as
// in steps of 512 (0.5B model, 2 cores: 167 vs 168 tokens/s), and the
// scheduler can only hand the engine to a newly arrived request between
// steps: small steps let an editor's completion in within a fraction of a
// second of background prefill instead of several.
const DefaultBatch = 64

// gpuLayers offloads nothing: the CPU build has no GPU backend.
func gpuLayers(int) int { return 0 }

func loadGPUBackend() error { return nil }
