//go:build !cuda && !metal

package cgo

// GPUBackend names the GPU backend this binary was built for ("" for CPU).
const GPUBackend = ""

// DefaultBatch is the most tokens one engine step may carry unless told
// otherwise (llama.cpp's n_batch, llama-server's default): a cap, not the
// step's size. The scheduler sizes each step by time below it (sched's
// stepPrefillBudget: half a second while a request could join, whole
// micro-batches within two seconds for a prompt alone), and a Chat or FIM
// prompt that fits runs in one step. Steps of 64 tokens, the old default,
// prefilled the 0.5B model at 0.8x llama-server's rate.
const DefaultBatch = 2048

// gpuLayers offloads nothing: the CPU build has no GPU backend.
func gpuLayers(int) int { return 0 }

func loadGPUBackend() error { return nil }
