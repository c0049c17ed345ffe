package metric

import (
	"fmt"

	vm "github.com/VictoriaMetrics/metrics"
)

// HistogramDef defines a histogram with fixed upper bounds (plus +Inf),
// in the Prometheus layout (_bucket{le=...}, _sum, _count).
type HistogramDef struct {
	def    *Def
	bounds []float64
}

// NewHistogramDef defines a histogram, with labels when each owner keeps
// one per label value (a scheduler's per class); each owner makes its own
// with New.
func NewHistogramDef(name, help string, bounds []float64, labels ...string) *HistogramDef {
	if err := vm.ValidateBuckets(bounds); err != nil {
		panic("metric: bad buckets for " + name + ": " + err.Error())
	}
	return &HistogramDef{def: define(name, help, KindHistogram, labels), bounds: bounds}
}

// Bounds are the buckets' upper bounds, without +Inf.
func (hd *HistogramDef) Bounds() []float64 { return hd.bounds }

// Histogram is one live histogram: observed on the hot path, rendered by
// the library at scrape time. Its set is its own, never the library's
// process-wide default, so it goes away with its owner.
type Histogram struct {
	def  *Def
	set  *vm.Set
	hist *vm.PrometheusHistogram
}

// New makes a live histogram of the definition, for the label values
// given in the definition's order.
func (hd *HistogramDef) New(labelValues ...string) *Histogram {
	if len(labelValues) != len(hd.def.Labels) {
		panic(fmt.Sprintf("metric: %s takes %d label values, got %d", hd.def.Name, len(hd.def.Labels), len(labelValues)))
	}
	s := vm.NewSet()
	return &Histogram{def: hd.def, set: s, hist: s.NewPrometheusHistogramExt(hd.def.sample(labelValues), hd.bounds)}
}

// Observe counts one value. Any goroutine.
func (h *Histogram) Observe(v float64) { h.hist.Update(v) }
