//go:build metal

package cgo

// GPUBackend names the GPU backend this binary was built for. On darwin/arm64
// the ggml module package compiles Metal in (GGML_USE_METAL), so there is no
// plugin to load.
const GPUBackend = "metal"

// DefaultBatch: a cap on a step, which the scheduler sizes by time below
// it, as on the CPU (gpu.go).
const DefaultBatch = 2048

// gpuLayers offloads every layer unless told otherwise (0: all, <0: none).
func gpuLayers(n int) int {
	switch {
	case n == 0:
		return 999
	case n < 0:
		return 0
	}
	return n
}

func loadGPUBackend() error { return nil }
