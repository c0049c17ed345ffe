//go:build !cuda && !metal

package cgo

// GPUBackend names the GPU backend this binary was built for ("" for CPU).
const GPUBackend = ""

// gpuLayers offloads nothing: the CPU build has no GPU backend.
func gpuLayers(int) int { return 0 }

func loadGPUBackend() error { return nil }
