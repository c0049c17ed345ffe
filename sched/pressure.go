package sched

import "superfluid/engine"

// Memory pressure: the machine running short of memory (read outside the
// scheduler, by package pressure, and told to it with SetPressure). The
// reactions are decided here, in the planner, and carried out by the loop:
//
//   - Warning: the cache sheds memory (PressureCache.ShedMemory): nothing
//     more is exported to host memory, and host memory and the pool's idle
//     entries are evicted down to their low watermarks.
//   - Critical: the same, and every decoding Background lane is preempted
//     through the ordinary preemption path (preempt.go) — its job requeued
//     with its output so far — and its stream moved to the disk tier
//     (PressureCache.ParkStream); no Background job is admitted. When the
//     pressure clears, the requeued jobs are admitted again and resume
//     from the parked stream, warm, with nothing lost.
//
// Only Background work is parked: a person waits on every other class.

// Pressure is how short of memory the machine is.
type Pressure uint8

// The levels, calmest first.
const (
	PressureNone Pressure = iota
	PressureWarning
	PressureCritical
)

var pressureNames = [...]string{"none", "warning", "critical"}

func (p Pressure) String() string {
	if int(p) < len(pressureNames) {
		return pressureNames[p]
	}
	return "unknown"
}

// PressureCache is a Cache that gives memory back under pressure (package
// kv's does). The scheduler's goroutine calls it, like the rest of Cache.
type PressureCache interface {
	Cache
	// ShedMemory turns shedding on (at Warning and Critical) or off. On,
	// nothing more is exported to host memory, and host memory and the
	// pool's idle entries are evicted down to their low watermarks. It
	// returns the bytes it evicted.
	ShedMemory(on bool) int64
	// ParkStream moves a stream just released (Release(seq, tokens)) out
	// of the pool to the disk tier, and returns the bytes of pool it
	// freed; 0 when it could not be parked (no disk tier, a full writer):
	// it then stays cached as it was.
	ParkStream(tokens []engine.Token) int64
}

// SetPressure tells the scheduler the machine's memory pressure; it acts
// from its next step on. Any goroutine.
func (s *Scheduler) SetPressure(level Pressure) {
	s.pressure.Store(uint32(level))
	s.nudge()
}

// setPressure takes in a new level on the runner's goroutine: the cache
// starts or stops shedding when the level crosses Warning.
func (l *loop) setPressure(level Pressure) {
	was := l.p.pressure
	if level == was {
		return
	}
	l.p.pressure = level
	if (level >= PressureWarning) == (was >= PressureWarning) {
		return
	}
	if pc, ok := l.cache.(PressureCache); ok {
		l.stats.pressureEvictedBytes.Add(uint64(max(pc.ShedMemory(level >= PressureWarning), 0)))
	}
}

// parkReleased moves a stream a lane parked for pressure released out of
// the pool.
func (l *loop) parkReleased(tokens []engine.Token) {
	if pc, ok := l.cache.(PressureCache); ok && len(tokens) > 0 {
		l.stats.pressureEvictedBytes.Add(uint64(max(pc.ParkStream(tokens), 0)))
	}
}

// preemptForPressure preempts, at Critical, every Background lane that
// decodes: its prompt is whole in its sequence, so parked it resumes from
// the disk tier with nothing to prefill again. A Background lane still
// prefilling carries on and is parked once it decodes.
func (p *planner) preemptForPressure() {
	if p.pressure < PressureCritical {
		return
	}
	for _, l := range p.lanes {
		if !l.admitted || l.finishing || l.job.class != Background || !l.decoding() {
			continue
		}
		p.preempt(l)
		l.parkForPressure = true
		p.stats.pressureParks.Add(1)
	}
}

// admitsUnderPressure reports whether class c may take a lane at the
// current pressure: at Critical, Background work waits.
func (p *planner) admitsUnderPressure(c Class) bool {
	return p.pressure < PressureCritical || c != Background
}
