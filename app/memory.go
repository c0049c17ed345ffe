package app

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"superfluid/engine"
)

// goHeapHeadroom is what the Go heap may hold beside the host cache and a
// conversation's exported state: request buffers, streams, the park queue.
const goHeapHeadroom = 512 << 20

// limitGoHeap bounds the Go heap to what the server can need, unless the
// user set GOMEMLIMIT. The host tier keeps conversation state in the Go
// heap (up to --host-cache bytes), and with the collector's default of
// letting the heap double before it runs, a full 256 MiB host cache held
// the heap at 540 MB and the process at 760 MB in a soak. Those blobs
// hold no pointers, so collecting more often costs next to nothing.
func limitGoHeap(hostCache int64, desc *engine.Descriptor) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	// Two whole-context exports: one being parked, one being restored.
	export := 2 * int64(desc.Ctx) * desc.KVBytesPerToken
	limit := max(hostCache, 0) + export + goHeapHeadroom
	if prev := debug.SetMemoryLimit(-1); prev != math.MaxInt64 && prev >= limit {
		return // a stack already in this process asked for as much
	}
	debug.SetMemoryLimit(limit)
	slog.Debug("go heap limit", "bytes", limit, "host_cache", hostCache, "export", export)
}
