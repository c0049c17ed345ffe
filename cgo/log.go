package cgo

/*
#include <stdint.h>
#include "superfluid.h"
extern void sfGoLog(int32_t level, char *text);
*/
import "C"

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// llama.cpp and ggml log through one sink, installed at init (after the
// ggml package's own sink, which writes to stderr). Their lines go to slog
// at debug level; warnings and errors are also kept so a failed load can say
// why.
func init() {
	C.sf_set_log(C.sf_log_fn(C.sfGoLog))
}

// ggml log levels (enum ggml_log_level).
const (
	ggmlLevelWarn  = 3
	ggmlLevelError = 4
	ggmlLevelCont  = 5
)

var nativeLog struct {
	sync.Mutex
	line    strings.Builder
	level   int32
	lastErr string
}

//export sfGoLog
func sfGoLog(level C.int32_t, text *C.char) {
	s := C.GoString(text)
	l := &nativeLog
	l.Lock()
	defer l.Unlock()
	if int32(level) != ggmlLevelCont {
		l.level = int32(level)
	}
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			l.line.WriteString(s)
			return
		}
		l.line.WriteString(s[:i])
		emitNativeLine(l.level, l.line.String())
		l.line.Reset()
		s = s[i+1:]
	}
}

func emitNativeLine(level int32, line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	if level >= ggmlLevelWarn {
		nativeLog.lastErr = line
	}
	if slog.Default().Enabled(context.Background(), slog.LevelDebug) {
		slog.Debug(line, "src", "llama.cpp")
	}
}

// lastLlamaError returns the last warning or error llama.cpp logged, and
// forgets it.
func lastLlamaError() string {
	nativeLog.Lock()
	defer nativeLog.Unlock()
	s := nativeLog.lastErr
	nativeLog.lastErr = ""
	return s
}

var cpuOnce sync.Once

// CPUFeatures returns the features ggml's CPU backend was built with, e.g.
// "AVX2=1;FMA=1;F16C=1".
func CPUFeatures() string {
	var buf [1024]C.char
	C.sf_cpu_features(&buf[0], C.int32_t(len(buf)))
	return C.GoString(&buf[0])
}

// CPUVariant names the build of ggml's CPU backend that runs and how it
// was chosen: "v4 (of v4 v3 v2; cpuid)", or "single build".
func CPUVariant() string {
	var buf [256]C.char
	C.sf_cpu_variant(&buf[0], C.int32_t(len(buf)))
	return C.GoString(&buf[0])
}

// LlamaCommit is the llama.cpp commit compiled in; LlamaSource says where
// its source came from (the Go module, or an upstream tree).
func LlamaCommit() string { return C.GoString(C.sf_llama_commit()) }

// LlamaSource says where the compiled llama.cpp's source came from.
func LlamaSource() string { return C.GoString(C.sf_llama_source()) }

// logCPUFeatures logs the CPU backend in use once per process, and warns
// when the SIMD the default build targets is missing.
func logCPUFeatures() {
	cpuOnce.Do(func() {
		f := CPUFeatures()
		v := CPUVariant()
		slog.Info("cpu backend", "variant", v, "features", f, "llama.cpp", LlamaCommit())
		if engineFallback != "" {
			slog.Warn("llama.cpp: offline fallback engine", "why", engineFallback)
		}
		switch {
		case strings.Contains(v, "using the best"):
			slog.Warn("SUPERFLUID_CPU not honoured", "variant", v)
		case os.Getenv("SUPERFLUID_CPU") != "" && !strings.Contains(v, "SUPERFLUID_CPU="):
			slog.Warn("SUPERFLUID_CPU has no effect: this binary has one CPU backend build (the default make builds several; ENGINE=module and CPU_VARIANTS=single one)")
		}
		if !strings.Contains(f, "AVX2=1") && strings.Contains(f, "SSE3") {
			slog.Warn("cpu backend built without AVX2: decoding runs the scalar baseline (build with make, not make portable)")
		}
	})
}
