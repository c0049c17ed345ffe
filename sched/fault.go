package sched

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"superfluid/engine"
)

// A tick the engine refuses or fails (other than for KV room) touches only
// what it blames. The planner should never make a plan the engine refuses;
// these are the answers for when it does, or for an engine fault:
//
//   - The error blames a lane (engine.FaultLane): that lane's request fails
//     alone, the lane leaves the engine, and the tick is planned again for
//     the others in the same step.
//   - It blames none and the plan admitted lanes the engine had not taken
//     (nothing ran): the second half of the admissions is taken back, their
//     jobs wait again at the head of their queues, and the tick is planned
//     again. A job refused more than maxDeferrals times as a plan's only
//     admission fails: the refusal is then its own, whatever the engine
//     said.
//   - Otherwise (a plan without admissions, or one the engine began to
//     run): every lane fails, as nothing smaller is left to try.
//
// Each step of this strictly shrinks the lanes, so re-planning ends.

// maxDeferrals is how many times a job may be taken back as the only
// admission of a plan refused without blame; the next such refusal fails
// it.
const maxDeferrals = 3

// tickRefused handles a failed tick of pl and reports whether to plan the
// tick again. ev is what the engine reported: a tick refused by validation
// reports no lanes and changed nothing; one that failed later reports the
// lanes it touched, which are taken in first.
func (l *loop) tickRefused(pl *engine.Plan, ev *engine.Events, err error, start, end time.Time) bool {
	p := l.p
	l.stats.tickErrors.Add(1)
	applied := ev != nil && len(ev.Lanes) > 0
	if applied {
		p.advance(ev, end.Sub(start), end)
		l.deliver(ev, end)
	}
	if ln := l.blamed(err); ln != nil {
		l.logTickError(pl, err, "failed the lane at fault", ln)
		l.isolate(ln, err, end)
		return true
	}
	if !applied && len(pl.Admits) > 0 {
		keep := len(pl.Admits) / 2
		l.logTickError(pl, err, fmt.Sprintf("took back %d of %d admissions", len(pl.Admits)-keep, len(pl.Admits)), nil)
		l.deferAdmits(pl.Admits[keep:], len(pl.Admits) == 1, err, end)
		return true
	}
	l.logTickError(pl, err, "failed every lane", nil)
	l.abandonLanes(fmt.Errorf("sched: engine tick failed: %w", err), end)
	return false
}

// blamed is the lane err blames, or nil.
func (l *loop) blamed(err error) *lane {
	if tag, ok := engine.FaultLane(err); ok {
		return l.p.find(tag)
	}
	return nil
}

// isolate fails ln's request with err and takes the lane out of the engine
// alone (unless the engine said it does not hold it). Its sequence goes
// back empty: what it holds is in doubt.
func (l *loop) isolate(ln *lane, err error, end time.Time) {
	p := l.p
	p.finishLane(ln, FinishError, fmt.Errorf("sched: the engine refused this request: %w", err), end)
	if ln.admitted && !errors.Is(err, engine.ErrUnknownLane) {
		l.retire.Reset()
		l.retire.Retires = append(l.retire.Retires, ln.tag)
		_, _ = l.tick(&l.retire) // refused: the engine does not hold it either
	}
	_ = l.eng.Free(ln.seq)
	ln.npast = 0
	p.dropLanes(func(x *lane) bool { return x == ln })
}

// deferAdmits takes back admissions the engine refused without running
// anything: each lane's sequence goes back to the cache as it was
// acquired, and its job waits at the head of its queue again, in order.
// solo: the plan admitted nothing else, so the refusal counts against the
// job.
func (l *loop) deferAdmits(admits []engine.Admit, solo bool, err error, end time.Time) {
	p := l.p
	for i := len(admits) - 1; i >= 0; i-- {
		ln := p.find(admits[i].Lane)
		if ln == nil || ln.admitted {
			continue
		}
		j := ln.job
		p.unbind(ln)
		if ln.firstAdmission {
			j.admitted, j.admittedAt, j.cached = false, time.Time{}, 0
		}
		if solo {
			j.deferrals++
		}
		if j.deferrals > maxDeferrals {
			p.endJob(j, FinishError, fmt.Errorf("sched: the engine refused every plan admitting this request: %w", err), end)
			continue
		}
		p.stats.admitsDeferred.Add(1)
		p.requeueFront(j)
	}
	p.admitBlocked = true
}

// logTickError logs a failed tick at ERROR with the shape of its plan and
// what was done about it; ln is the lane it blamed, if any.
func (l *loop) logTickError(pl *engine.Plan, err error, action string, ln *lane) {
	prefill := 0
	for i := range pl.Prefills {
		prefill += int(pl.Prefills[i].Count)
	}
	attrs := []any{
		"err", err, "action", action,
		"retires", len(pl.Retires), "admits", len(pl.Admits),
		"prefill_lanes", len(pl.Prefills), "prefill_tokens", prefill,
		"decode_lanes", len(pl.Decodes), "batch", l.p.batch, "lanes", len(l.p.lanes),
	}
	if ln != nil {
		attrs = append(attrs, "lane", ln.tag, "class", ln.job.class.String(), "request", ln.job.id)
	}
	log := l.p.cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Error("sched: engine tick failed", attrs...)
}
