package sched

import (
	"context"
	"time"
)

// Observer is told of each request's life in the scheduler: the seam
// tracing hangs on (package tracing implements it over OpenTelemetry), so
// the scheduler owes no tracing library anything and its tests run
// without one. Config.Observer nil: nothing is told and nothing is spent.
//
// Start is called on Submit's goroutine; every JobObserver method on the
// scheduler's, in the order things happen, with the injected Clock's
// times. An implementation must not block: it runs inside the step.
type Observer interface {
	// Start is told of an accepted request; ctx is the one Submit was
	// given (a trace's parent span travels in it). It returns the
	// request's own observer, or nil to observe nothing of it.
	Start(ctx context.Context, r ObservedRequest) JobObserver
}

// ObservedRequest is what a request is when it is submitted.
type ObservedRequest struct {
	ID           uint64 // the stream's id
	Class        Class
	PromptTokens int
	MaxTokens    int // 0: no limit
	Submitted    time.Time
}

// JobObserver follows one request. A preempted request is admitted, and
// prefills, again: its methods may repeat in that order.
type JobObserver interface {
	// Admitted: the request took a lane. The cache was asked for its
	// prefix over [Start, End].
	Admitted(a Admission)
	// Restored: the parked prefix read off the scheduler's goroutine was
	// imported at `at`; tokens 0 when it failed (the lane prefills cold).
	Restored(at time.Time, tokens int)
	// Prefilled: one engine step, over [start, end], prefilled tokens of
	// the prompt.
	Prefilled(start, end time.Time, tokens int)
	// Decoding: the admission's first token was delivered (the request's
	// first, or its first since it resumed): its prefill is over.
	Decoding(at time.Time)
	// Preempted: the lane gave way to a better class; the request is
	// queued again, its output so far its prompt.
	Preempted(at time.Time)
	// Published: a lane's sequence went back to the cache over [start,
	// end], holding tokens; parked when the cache also queued it for disk.
	Published(start, end time.Time, tokens int, parked bool)
	// Ended: the request has its result.
	Ended(at time.Time, r Result)
}

// Admission is one lane's start as the cache saw it.
type Admission struct {
	Start, End time.Time
	// Cached is the prompt tokens the cache matched; Tier where they were
	// ("resident", "host", "parked"; "" for a cold start or a cache that
	// does not say). Restoring: they are still being read from disk.
	Cached    int
	Tier      string
	Restoring bool
	// Resumed: the request was preempted and takes a lane again.
	Resumed bool
}

// TierReporter is a Cache that says where its last Acquire found the
// prefix and whether its last Release queued the stream for parking
// (package kv's does). The scheduler asks only when it has an Observer.
type TierReporter interface {
	LastAcquireTier() string
	LastReleaseParked() bool
}
