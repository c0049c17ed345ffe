package sched

import "time"

// Clock is where the runner reads the time and sets deadline timers. The
// planner never reads a clock: the runner passes it the time. Tests inject
// a virtual clock that the fake engine advances by its cost model, so no
// scheduling test sleeps.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or, for a virtual clock,
	// whenever the clock passes the moment) once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; false if it already ran or was stopped.
	Stop() bool
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// RealClock returns the wall clock, the default of Config.Clock.
func RealClock() Clock { return realClock{} }
