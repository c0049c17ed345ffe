package app

import (
	"runtime/debug"
	"testing"
)

func TestGCPaceForAHeapOfBlobs(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	tuneGC()
	if got := debug.SetGCPercent(100); got != heapGrowthPercent {
		t.Fatalf("GOGC %d, want %d", got, heapGrowthPercent)
	}
	// The user's GOGC wins.
	t.Setenv("GOGC", "200")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC %d set over the user's", got)
	}
}
