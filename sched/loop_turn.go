package sched

import (
	"context"
	"time"
)

// stepInTurn runs the step planned from now in the engine's turn at the
// arbiter: it states the most urgent class the step can run, waits for the
// turn (readying the lanes again after a wait), plans and ticks, and
// releases the turn, claiming the next one if work remains. A step that
// decodes nothing (retires, admits, lanes waiting on restores) takes no
// turn, and one ending idle keeps none, so an engine never holds others
// up while it waits. When the acquire fails (ctx ended, the turn left)
// nothing runs and turnErr says why.
func (l *loop) stepInTurn(ctx context.Context, now time.Time) bool {
	p := l.p
	class, runs := p.runnableClass()
	if !runs {
		l.turn.drop()
		return l.tickStep(now)
	}
	waited, err := l.turn.acquire(ctx, class)
	if err != nil {
		l.turnErr = err
		return false
	}
	defer func() { // the turn passes on, whatever the step does
		if v := recover(); v != nil {
			l.turn.release(0, false)
			panic(v)
		}
	}()
	if waited {
		// The wait may have been long: plan from the time the turn came,
		// with what was submitted, cancelled or expired meanwhile (a Chat
		// or FIM request that arrived raised the claim: it runs now).
		end := l.clock.Now()
		l.stats.observeTurnWait(end.Sub(now))
		now = end
		if l.intake != nil {
			l.intake()
		}
		l.prepare(now)
	}
	busy := l.tickStep(now)
	next, more := p.runnableClass()
	l.turn.release(next, busy && more)
	return busy
}
