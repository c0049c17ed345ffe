package app

import (
	"context"
	"sync/atomic"

	"superfluid/kv"
	"superfluid/pressure"
	"superfluid/sched"
)

// PressureOptions configure how the server watches the machine's memory.
type PressureOptions struct {
	// Off turns the watch off: nothing reacts to memory pressure.
	Off bool
	// Monitor is the source, its thresholds and the poll interval
	// (pressure.Config; the zero value polls Linux's PSI and
	// /proc/meminfo every second with pressure.DefaultThresholds). A test
	// sets Source to a pressure.File it writes: the testing hook.
	Monitor pressure.Config
	// Watermarks are what shedding evicts host memory and the KV pool to
	// (kv.Watermarks; default 85% high, 70% low).
	Watermarks kv.Watermarks
}

// var _ checks that the cache gives memory back when the scheduler asks.
var _ sched.PressureCache = (*kv.Cache)(nil)

// pressureWatch is the stack's monitor, started once the models are
// loaded (its first level reaches them all) and stopped before they
// unload.
type pressureWatch struct {
	monitor *pressure.Monitor
	target  atomic.Pointer[Registry]
	stop    context.CancelFunc
	done    chan struct{}
}

// newPressureWatch makes the monitor (nil when the watch is off); its
// counters go on /metrics through o.HTTP.Metrics.
func newPressureWatch(o *Options) *pressureWatch {
	if o.Pressure.Off {
		return nil
	}
	w := &pressureWatch{}
	w.monitor = pressure.NewMonitor(o.Pressure.Monitor, func(p sched.Pressure) {
		if r := w.target.Load(); r != nil {
			r.SetPressure(p)
		}
	})
	o.HTTP.Metrics = append(o.HTTP.Metrics, w.monitor.AddMetrics)
	return w
}

// start polls on its own goroutine, telling r of each change.
func (w *pressureWatch) start(r *Registry) {
	if w == nil {
		return
	}
	w.target.Store(r)
	ctx, cancel := context.WithCancel(context.Background())
	w.stop, w.done = cancel, make(chan struct{})
	go func() { defer close(w.done); w.monitor.Run(ctx) }()
}

// close stops the polling and waits for it.
func (w *pressureWatch) close() {
	if w == nil || w.stop == nil {
		return
	}
	w.stop()
	<-w.done
}

// SetPressure tells every loaded model's scheduler the machine's memory
// pressure; a model loaded later starts at it.
func (r *Registry) SetPressure(p sched.Pressure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pressure = p
	for _, sl := range r.slots {
		if sl.st != nil {
			sl.st.setPressure(p)
		}
	}
}

// setPressure tells the stack's scheduler (an embedding model has none).
func (ms *modelStack) setPressure(p sched.Pressure) {
	if ms.Sched != nil {
		ms.Sched.SetPressure(p)
	}
}
