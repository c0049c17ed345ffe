package sched

import (
	"sync"
	"time"
)

// fakeClock is virtual time: it moves only when Advance is called (by the
// fake engine, by its cost model).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock { return &fakeClock{now: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// since is virtual time elapsed since the epoch.
func (c *fakeClock) since() time.Duration { return c.Now().Sub(epoch) }
