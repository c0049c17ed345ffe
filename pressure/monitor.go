package pressure

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"superfluid/metric"
	"superfluid/sched"
)

// Config configures a Monitor.
type Config struct {
	// Source is what is polled; nil: the Linux source with
	// DefaultThresholds.
	Source Source
	// Interval is the time between polls (default 1 s: two small /proc
	// reads; PSI's shortest average is over 10 s anyway).
	Interval time.Duration
	// Calm is how many polls in a row must read a calmer level before the
	// monitor steps down to it (default 3): a machine at the edge of a mark
	// does not flap between parking and resuming. A worse level is taken
	// at once.
	Calm int
	// Logger receives the transitions (default slog.Default()).
	Logger *slog.Logger
}

// Monitor polls a Source and hands each change of level to apply. Level
// and AddMetrics may be called from any goroutine.
type Monitor struct {
	cfg   Config
	apply func(sched.Pressure)

	track tracker // Run's goroutine only

	level       atomic.Uint32
	transitions [3]atomic.Uint64 // by the level entered
	readErrors  atomic.Uint64
	lastErr     atomic.Pointer[string]
}

// NewMonitor makes a monitor that tells apply each new level.
func NewMonitor(cfg Config, apply func(sched.Pressure)) *Monitor {
	if cfg.Source == nil {
		cfg.Source = NewLinux(DefaultThresholds)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Calm <= 0 {
		cfg.Calm = 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Monitor{cfg: cfg, apply: apply, track: tracker{calm: cfg.Calm}}
}

// Level is the level the monitor last handed on.
func (m *Monitor) Level() sched.Pressure { return sched.Pressure(m.level.Load()) }

// Run polls until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.Poll()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads the source once and acts on a change. A failed read counts
// and is logged once per distinct error; the level stays where it was.
func (m *Monitor) Poll() {
	read, err := m.cfg.Source.Level()
	if err != nil {
		m.readErrors.Add(1)
		msg := err.Error()
		if prev := m.lastErr.Swap(&msg); prev == nil || *prev != msg {
			m.cfg.Logger.Warn("memory pressure: reading the source failed", "err", err)
		}
		return
	}
	m.lastErr.Store(nil)
	from := m.track.level
	to, changed := m.track.observe(read)
	if !changed {
		return
	}
	m.level.Store(uint32(to))
	m.transitions[to].Add(1)
	m.cfg.Logger.Info("memory pressure", "from", from.String(), "to", to.String())
	m.apply(to)
}

// tracker decides the level from a run of readings: up at once, down only
// after calm readings in a row at or below the calmer level.
type tracker struct {
	calm  int
	level sched.Pressure
	quiet int // readings in a row below level
	lower sched.Pressure
}

func (t *tracker) observe(read sched.Pressure) (sched.Pressure, bool) {
	switch {
	case read > t.level:
		t.level, t.quiet = read, 0
		return read, true
	case read == t.level:
		t.quiet = 0
		return read, false
	}
	if t.quiet == 0 || read > t.lower {
		t.lower = read
	}
	t.quiet++
	if t.quiet < t.calm {
		return t.level, false
	}
	t.level, t.quiet = t.lower, 0
	return t.level, true
}

var (
	levelGauge       = metric.Gauge("superfluid_pressure_level", "The machine's memory pressure as the server reads it: 0 none, 1 warning, 2 critical.")
	transitionsTotal = metric.Counter("superfluid_pressure_transitions_total", "Changes of the memory-pressure level, by the level entered.", "to")
	readErrorsTotal  = metric.Counter("superfluid_pressure_read_errors_total", "Polls of the memory-pressure source that failed.")
)

// AddMetrics adds the monitor's samples to a scrape.
func (m *Monitor) AddMetrics(p *metric.Page) {
	p.Add(levelGauge, float64(m.level.Load()))
	for l := range m.transitions {
		p.Add(transitionsTotal, float64(m.transitions[l].Load()), sched.Pressure(l).String())
	}
	p.Add(readErrorsTotal, float64(m.readErrors.Load()))
}
