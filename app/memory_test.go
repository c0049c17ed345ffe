package app

import (
	"math"
	"runtime/debug"
	"testing"

	"superfluid/engine"
)

func TestGoHeapLimitCoversTheHostCache(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	desc := &engine.Descriptor{Ctx: 16384, KVBytesPerToken: 4096}
	limitGoHeap(256<<20, desc)
	want := int64(256<<20) + 2*16384*4096 + goHeapHeadroom
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("limit %d, want %d", got, want)
	}
	// A second, smaller stack in the same process keeps the larger limit.
	limitGoHeap(0, desc)
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("limit lowered to %d by a smaller stack", got)
	}
	// The user's GOMEMLIMIT wins.
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "4GiB")
	limitGoHeap(256<<20, desc)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit %d set over the user's GOMEMLIMIT", got)
	}
}
