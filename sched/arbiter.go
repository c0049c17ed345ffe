package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Arbiter decides which of the engines in one process runs its next step.
// Engines on one machine share its cores: two llama_decode calls at once
// thrash ggml's spinning threadpools and each runs at half speed or worse,
// so one step runs at a time, and the arbiter chooses whose (nextTurn):
// the most urgent class waiting anywhere, the longest waiting among equal
// classes, and an engine passed over StarvationTurns grants next. See
// doc.go, "Several engines".
//
// Each engine Joins once and gets a Turn; its runner calls Acquire before
// a step and Release after it. An uncontended Acquire takes a mutex and
// returns: a lone engine runs as fast as without an arbiter.
type Arbiter struct {
	clock Clock
	bound int
	log   *slog.Logger

	mu sync.Mutex
	// holder runs a step, or has the next one reserved (reserved: it has
	// not acquired it yet); nil: the engines are free to step.
	holder   *Turn
	reserved bool
	waiting  []*turnWait // arrival order
	turns    []*Turn
	arrivals uint64
	claims   []turnClaim // reused by grantNext
}

// ArbiterConfig tunes an Arbiter. The zero value is usable.
type ArbiterConfig struct {
	// Clock times waits (for logs). nil: the wall clock.
	Clock Clock
	// StarvationTurns is the starvation bound: an engine passed over this
	// many grants while it waits gets the next one, whatever its class.
	// 0 (or less): 64.
	StarvationTurns int
	// Logger receives a debug line for each grant the starvation bound
	// forced. nil: slog.Default().
	Logger *slog.Logger
}

// ErrTurnLeft: the turn left the arbiter (its engine was unloaded).
var ErrTurnLeft = errors.New("sched: the engine's turn left the arbiter")

// NewArbiter makes an arbiter; one per process.
func NewArbiter(cfg ArbiterConfig) *Arbiter {
	a := &Arbiter{clock: cfg.Clock, bound: cfg.StarvationTurns, log: cfg.Logger}
	if a.clock == nil {
		a.clock = realClock{}
	}
	if a.bound <= 0 {
		a.bound = defaultStarvationTurns
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a
}

// Turn is one engine's place at the arbiter. Acquire, Release and
// Contended belong to the engine's runner; Leave may be called from any
// goroutine.
type Turn struct {
	a    *Arbiter
	name string

	// Guarded by a.mu. active: the engine has work of class class (it said
	// so at Acquire, or at a release with more to run); an interactive
	// class keeps other engines' prefill steps short.
	active bool
	class  Class
	left   bool
	wait   *turnWait // its pending Acquire
	// lastInteractive is when the engine last claimed a Chat or FIM step.
	lastInteractive time.Time
}

// turnWait is one pending Acquire.
type turnWait struct {
	turn  *Turn
	claim turnClaim
	since time.Time
	// granted receives once: the step is the waiter's, or (err set first)
	// its turn left.
	granted chan struct{}
	err     error
}

// Join adds an engine; name says which in logs and metrics.
func (a *Arbiter) Join(name string) *Turn {
	t := &Turn{a: a, name: name}
	a.mu.Lock()
	a.turns = append(a.turns, t)
	a.mu.Unlock()
	return t
}

// Name is the name the turn joined with.
func (t *Turn) Name() string { return t.name }

// Acquire blocks until this engine may run one step, stating the most
// urgent class the step serves. It fails with ctx's error if ctx ends
// first, and with ErrTurnLeft once the turn has left.
func (t *Turn) Acquire(ctx context.Context, class Class) error {
	_, err := t.acquire(ctx, class)
	return err
}

// acquire is Acquire, also reporting whether it had to wait.
func (t *Turn) acquire(ctx context.Context, class Class) (waited bool, err error) {
	a := t.a
	a.mu.Lock()
	switch {
	case t.left:
		a.mu.Unlock()
		return false, ErrTurnLeft
	case ctx.Err() != nil:
		t.dropLocked()
		a.mu.Unlock()
		return false, fmt.Errorf("sched: turn %s: %w", t.name, ctx.Err())
	}
	t.active, t.class = true, class
	if class.interactive() {
		t.lastInteractive = a.clock.Now()
	}
	switch {
	case a.holder == nil, a.holder == t && a.reserved:
		a.holder, a.reserved = t, false
		a.mu.Unlock()
		return false, nil
	case a.holder == t:
		a.mu.Unlock()
		return false, fmt.Errorf("sched: turn %s acquired twice without a release", t.name)
	case a.reserved && class < a.holder.class:
		// Reserved for an engine between two steps of a worse class: this
		// claim would have won had it been there at the release.
		a.holder, a.reserved = t, false
		a.mu.Unlock()
		return false, nil
	}
	a.arrivals++
	w := &turnWait{turn: t, claim: turnClaim{class: class, arrival: a.arrivals}, since: a.clock.Now(), granted: make(chan struct{}, 1)}
	t.wait = w
	a.waiting = append(a.waiting, w)
	a.mu.Unlock()

	select {
	case <-w.granted:
		if w.err != nil {
			return true, w.err
		}
		a.mu.Lock()
		left := t.left // Leave came between the grant and now
		a.mu.Unlock()
		if left {
			return true, ErrTurnLeft
		}
		return true, nil
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-w.granted:
		// Granted (or left) as ctx ended: a granted step is passed on.
		if w.err != nil {
			return true, w.err
		}
		t.active = false
		if a.holder == t { // not passed on by a Leave already
			a.grantNext(nil, 0)
		}
	default:
		a.removeWait(w)
		t.active = false
	}
	return true, fmt.Errorf("sched: turn %s: %w", t.name, ctx.Err())
}

// Release ends the step Acquire granted, and hands the next one to the
// most urgent waiter.
func (t *Turn) Release() { t.release(0, false) }

// release ends the step. With more, the engine has another step of class
// next to run and claims it beside the waiters, as if it had waited since
// now: if it wins, the step is reserved for its next acquire, so a worse
// engine does not slip in between two steps of a better one.
func (t *Turn) release(next Class, more bool) {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.holder != t {
		return
	}
	if !more || t.left {
		t.active = false
		a.grantNext(nil, 0)
		return
	}
	t.active, t.class = true, next
	a.grantNext(t, next)
}

// drop gives up a step reserved by a release with more (the engine found
// nothing to decode after all) and says the engine has no work.
func (t *Turn) drop() {
	t.a.mu.Lock()
	t.dropLocked()
	t.a.mu.Unlock()
}

func (t *Turn) dropLocked() {
	a := t.a
	t.active = false
	if a.holder == t && a.reserved {
		a.grantNext(nil, 0)
	}
}

// Leave takes the turn out: a pending Acquire and every later one fail
// with ErrTurnLeft, and a step it holds passes on. Call it once the
// engine's runner has stopped (a step still running when it is called
// then runs beside another engine's). Leave twice is harmless.
func (t *Turn) Leave() {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.left {
		return
	}
	t.left, t.active = true, false
	a.turns = slices.DeleteFunc(a.turns, func(o *Turn) bool { return o == t })
	if w := t.wait; w != nil {
		a.removeWait(w)
		w.err = ErrTurnLeft
		w.granted <- struct{}{}
	}
	if a.holder == t {
		a.grantNext(nil, 0)
	}
}

// raise makes a pending Acquire claim class if that is more urgent: a
// Chat or FIM request arrived while the engine waited (it can run in the
// step being waited for, preempting a worse lane if need be), and must not
// wait behind the stale claim's class.
func (t *Turn) raise(class Class) {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	if w := t.wait; w != nil && class < w.claim.class {
		w.claim.class = class
		t.class = class
	}
	if class.interactive() {
		t.lastInteractive = t.a.clock.Now()
	}
}

// Contended reports whether another engine waits with a more urgent class
// than the one this engine last stated (any class, if it has no work).
func (t *Turn) Contended() bool {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	return t.contendedLocked()
}

func (t *Turn) contendedLocked() bool {
	for _, w := range t.a.waiting {
		if w.turn != t && (!t.active || w.claim.class < t.class) {
			return true
		}
	}
	return false
}

// others reports, for the planner, what the other engines sharing the
// arbiter mean for this engine's Agent and Background prefill steps.
// joined: another engine is there, so a Chat or FIM request may arrive at
// it any moment and would wait out this engine's step in flight — the
// cross-engine form of a free lane (planner.joinerWaits); an idle engine
// is one a request can arrive at next. interactive: one claimed a Chat or
// FIM step within the last interactiveWindow — a person is at work there
// (an editor fires completions keystroke after keystroke), and each of
// their requests waits out this engine's step. One lock a plan.
func (t *Turn) others() (joined, interactive bool) {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	for _, o := range a.turns {
		if o == t {
			continue
		}
		joined = true
		if !o.lastInteractive.IsZero() && now.Sub(o.lastInteractive) < interactiveWindow {
			return true, true
		}
	}
	return joined, false
}

// interactiveWindow is how long after another engine's last Chat or FIM
// step this engine keeps its Agent and Background prefill steps to
// interactiveWaitSecs: longer than the pauses of someone typing.
const interactiveWindow = 10 * time.Second

// grantNext decides who runs the next step: a waiter, or the releasing
// turn self claiming class next (nil: no such claim). Everyone else
// waiting counts a grant passed over. Holds a.mu.
func (a *Arbiter) grantNext(self *Turn, next Class) {
	a.holder, a.reserved = nil, false
	claims := a.claims[:0]
	for _, w := range a.waiting {
		claims = append(claims, w.claim)
	}
	if self != nil {
		claims = append(claims, turnClaim{class: next, arrival: a.arrivals + 1})
	}
	a.claims = claims
	win := nextTurn(claims, a.bound)
	if win < 0 {
		return
	}
	for _, w := range a.waiting {
		w.claim.passed++
	}
	if win == len(a.waiting) {
		a.holder, a.reserved = self, true
		return
	}
	w := a.waiting[win]
	w.claim.passed-- // it was not passed over: it won
	if w.claim.passed >= a.bound {
		a.log.Debug("arbiter: starvation grant", "engine", w.turn.name, "class", w.claim.class,
			"passed", w.claim.passed, "waited", a.clock.Now().Sub(w.since))
	}
	a.removeWait(w)
	a.holder = w.turn
	w.granted <- struct{}{}
}

// removeWait takes w out of the waiting list. Holds a.mu.
func (a *Arbiter) removeWait(w *turnWait) {
	a.waiting = slices.DeleteFunc(a.waiting, func(o *turnWait) bool { return o == w })
	w.turn.wait = nil
}
