// Package panics is the server's one policy for a panic on a goroutine
// that runs request-derived work: it is recovered, logged with its stack,
// counted by the component it happened in (/metrics:
// superfluid_panics_total{component=...}), and turned into an error that
// fails only the work at fault — the request, lane, batch or file — while
// the goroutine keeps serving.
package panics

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
)

// Component names where a panic was recovered.
type Component int

const (
	Request     Component = iota // a request's handler or one of its parts (http)
	Scheduler                    // the scheduler's loop (sched)
	ModelLoader                  // loading a model, or reading its file (app)
	Batches                      // the batches worker (batches)
	Restore                      // the reader of a parked stream (kv)
	ParkWriter                   // the park file writer (park)
	numComponents
)

var names = [numComponents]string{"request", "scheduler", "model_loader", "batches", "restore", "park_writer"}

func (c Component) String() string { return names[c] }

var counts [numComponents]atomic.Uint64

// Error is a recovered panic as an error: what failed the work at fault.
type Error struct {
	Component Component
	Value     any
}

func (e *Error) Error() string {
	return fmt.Sprintf("internal error in the %s: panic: %v", e.Component, e.Value)
}

// Recovered takes in v, a value recover returned (not nil) on a goroutine
// of component c: it is counted and logged with the stack (call it in the
// deferred function itself, so the stack is the panic's), and returned as
// an *Error. attrs are added to the log line (slog key-value pairs naming
// the work failed).
func Recovered(c Component, v any, attrs ...any) error {
	counts[c].Add(1)
	slog.Error("panic recovered: the work at fault fails, the server carries on",
		append([]any{"component", c.String(), "panic", v}, append(attrs, "stack", string(debug.Stack()))...)...)
	return &Error{Component: c, Value: v}
}

// Count is how many panics were recovered in c since start.
func Count(c Component) uint64 { return counts[c].Load() }

// Each calls f for every component with its count, in a fixed order.
func Each(f func(c Component, n uint64)) {
	for c := range numComponents {
		f(c, counts[c].Load())
	}
}
