//go:build sfasan

package cgo

// `make asan` builds with this file: the package's own C++ (native/) is
// compiled with AddressSanitizer and the runtime is linked in. llama.cpp's
// packages keep their cached, uninstrumented build; the sanitizer still
// intercepts every allocation, so overruns of buffers our code allocates or
// receives are caught.

/*
#cgo CXXFLAGS: -fsanitize=address -fno-omit-frame-pointer -O1
#cgo LDFLAGS: -fsanitize=address
*/
import "C"
