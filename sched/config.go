package sched

import (
	"errors"
	"fmt"
	"log/slog"

	"superfluid/engine"
)

// Config tunes a Scheduler. The zero value is usable: every field has a
// default, documented beside it. New validates it before anything starts.
type Config struct {
	// Lanes is how many requests run at once. 0 takes the engine
	// descriptor's Lanes; more than the descriptor allows is refused.
	Lanes int

	// ClassLanes caps the lanes each class may hold at once (0: uncapped).
	// ParseClassLanes reads the --class-lanes spec into it.
	ClassLanes ClassLanes

	// StarvationSteps is the aging period and the starvation bound, in
	// engine steps: a queued request's class improves one level per period
	// it waits, and a lane passed over that many prefill steps (by younger
	// lanes) or steps of decode goes first. 0: 64 (at the CPU's default,
	// about what eight multi-round ticks were).
	StarvationSteps int

	// PrefillBudget caps the prompt tokens one step may prefill (at least
	// 64; the engine's batch caps it anyway). 0: no cap but the batch;
	// steps are sized by time below it (stepPrefillBudget).
	PrefillBudget int

	// BackgroundDivisor throttles the classes nobody watches token by token
	// (Agent and Background): they decode only on every Nth step. 0 or 1:
	// no throttling. SetBackgroundDivisor changes it while running.
	BackgroundDivisor int

	// MaxQueued bounds the requests waiting for a lane; Submit refuses more
	// with ErrQueueFull. 0: 4096.
	MaxQueued int

	// Clock reads the time and sets deadline timers. nil: the wall clock.
	Clock Clock

	// Observer is told of each request's life (queue, admission, prefill
	// steps, first token, preemption, publish, end): tracing's seam. nil:
	// nothing is observed.
	Observer Observer

	// Arbiter is this engine's place at the process's Arbiter, when several
	// engines share the machine: each step that decodes waits for its
	// turn, and Agent and Background prefill steps stay at the newcomer
	// bound while another engine shares the arbiter (doc.go, "Several
	// engines"). nil: the engine steps whenever it has work. The Scheduler
	// never calls Leave; its owner does when the engine is unloaded (a Run
	// waiting for its turn then returns).
	Arbiter *Turn

	// Speculation drafts decoding lanes' tokens (spec.go); the zero value
	// drafts nothing.
	Speculation Speculation

	// Logger receives what goes wrong on the scheduler's goroutine (a tick
	// the engine refused or failed, at ERROR). nil: slog.Default().
	Logger *slog.Logger
}

// Defaults.
const (
	defaultStarvationSteps = 64
	defaultMaxQueued       = 4096
	minFixedPrefillBudget  = 64
)

// withDefaults fills the zero fields of c from the engine's descriptor.
func (c Config) withDefaults(d *engine.Descriptor) Config {
	if c.Lanes == 0 {
		c.Lanes = d.Lanes
	}
	if c.StarvationSteps == 0 {
		c.StarvationSteps = defaultStarvationSteps
	}
	if c.BackgroundDivisor == 0 {
		c.BackgroundDivisor = 1
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = defaultMaxQueued
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Speculation = c.Speculation.withDefaults()
	return c
}

// validate checks a defaulted config against the engine it will drive.
func (c *Config) validate(d *engine.Descriptor) error {
	switch {
	case c.Lanes < 1:
		return fmt.Errorf("sched: %d lanes: need at least 1 (the engine descriptor says %d)", c.Lanes, d.Lanes)
	case d.Lanes > 0 && c.Lanes > d.Lanes:
		return fmt.Errorf("sched: %d lanes asked for; the engine runs at most %d", c.Lanes, d.Lanes)
	case d.Seqs > 0 && c.Lanes > d.Seqs:
		return fmt.Errorf("sched: %d lanes need a sequence each; the engine has %d", c.Lanes, d.Seqs)
	case d.Batch < c.Lanes:
		// Every decoding lane puts one token in a step.
		return fmt.Errorf("sched: a batch of %d tokens cannot carry one token for each of %d lanes", d.Batch, c.Lanes)
	case d.Ctx < 2:
		return fmt.Errorf("sched: a context of %d tokens leaves no room to generate", d.Ctx)
	case c.StarvationSteps < 1:
		return fmt.Errorf("sched: starvation steps %d: need at least 1", c.StarvationSteps)
	case c.PrefillBudget != 0 && c.PrefillBudget < minFixedPrefillBudget:
		return fmt.Errorf("sched: prefill budget %d below %d (0: the batch)", c.PrefillBudget, minFixedPrefillBudget)
	case c.BackgroundDivisor < 1:
		return fmt.Errorf("sched: background divisor %d: need at least 1", c.BackgroundDivisor)
	case c.MaxQueued < 1:
		return fmt.Errorf("sched: max queued %d: need at least 1", c.MaxQueued)
	}
	if err := c.Speculation.validate(); err != nil {
		return err
	}
	if c.Speculation.drafted() && c.Speculation.Drafter == nil {
		return fmt.Errorf("sched: speculation type %s without a drafter (the draft model or the model's MTP layers, opened)", c.Speculation.Type)
	}
	for cl, n := range c.ClassLanes {
		if n < 0 || n > c.Lanes {
			return fmt.Errorf("sched: class lanes: cap %d for %s outside [0, %d]", n, Class(cl), c.Lanes)
		}
	}
	return nil
}

// Errors a stream's Result carries, and Submit returns.
var (
	// ErrClosed: the scheduler stopped before the request finished.
	ErrClosed = errors.New("sched: scheduler closed")
	// ErrDeadline: the request's deadline passed before it started.
	ErrDeadline = errors.New("sched: deadline passed before the request started")
	// ErrCancelled: the request was cancelled before it started.
	ErrCancelled = errors.New("sched: cancelled")
	// ErrQueueFull: too many requests are waiting for a lane.
	ErrQueueFull = errors.New("sched: queue full")
)
