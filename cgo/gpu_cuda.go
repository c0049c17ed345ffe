//go:build cuda

package cgo

/*
#include <stdlib.h>
#include "superfluid.h"
*/
import "C"

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"unsafe"
)

// GPUBackend names the GPU backend this binary was built for.
const GPUBackend = "cuda"

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

var cudaOnce = sync.OnceValue(func() error {
	dir := os.Getenv("SUPERFLUID_LIB_DIR")
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cgo: locating the CUDA backend: %w", err)
		}
		dir = filepath.Join(filepath.Dir(exe), "..", "lib", "superfluid")
	}
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	n := int(C.sf_load_backends(cdir))
	slog.Info("gpu backend", "backend", "cuda", "dir", dir, "devices", n)
	if n < 2 { // the CPU device alone: no CUDA plugin was found
		return fmt.Errorf("cgo: no CUDA backend in %s (build it with build/cuda.sh, or set SUPERFLUID_LIB_DIR)", dir)
	}
	return nil
})

func loadGPUBackend() error { return cudaOnce() }
