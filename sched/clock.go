package sched

import "time"

// Clock is where the runner reads the time. The planner never reads a
// clock: the runner passes it the time, and deadlines are checked when each
// step is planned, so no plan waits on a timer. (The runner's one wait,
// gathering a burst on an idle engine — burst.go — is wall-clock
// milliseconds before any step, tested with testing/synctest.) Tests inject a virtual
// clock that the fake engine advances by its cost model, so no scheduling
// test sleeps.
type Clock interface {
	Now() time.Time
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// RealClock returns the wall clock, the default of Config.Clock.
func RealClock() Clock { return realClock{} }
