package app

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// heapGrowthPercent is the collector's GOGC for the server, unless the user
// set GOGC. The host tier keeps conversation state in the Go heap (up to
// --host-cache bytes), and the default of 100 lets the heap double before
// a collection: a full 256 MiB host cache held the heap at 550 MB and the
// process at 760 MB in a soak. Those blobs hold no pointers, so marking
// them costs next to nothing and collecting four times as often is cheap
// (gctrace showed each collection at well under 1% of the CPU).
const heapGrowthPercent = 25

// tuneGC sets the collector's pace for a server whose heap is mostly
// pointer-free conversation state.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(heapGrowthPercent)
	slog.Debug("go heap", "gogc", heapGrowthPercent)
}
