// Package metric is the one way superfluid defines a metric and renders
// /metrics. A metric is defined once, as a package-level Def (name, help,
// type, label names) in the package that owns the numbers; at scrape time
// each provider adds its current values to a Page, and the Page renders
// them in Prometheus' text format through VictoriaMetrics' metrics
// library.
//
// Counters that change per token stay plain atomics in their owners (the
// scheduler's, the cache's): the Page reads them at scrape time, so the
// hot path is the same with or without this package. Histograms observed
// per request (time to first token) are the library's own.
package metric

import (
	"fmt"
	"io"
	"strings"

	vm "github.com/VictoriaMetrics/metrics"
)

// Kind is a metric's Prometheus type.
type Kind string

const (
	KindCounter   Kind = "counter"
	KindGauge     Kind = "gauge"
	KindHistogram Kind = "histogram"
)

// Def is a metric's definition: what /metrics calls it, its HELP text,
// its type, and the names of its labels, in the order they are written.
type Def struct {
	Name   string
	Help   string
	Kind   Kind
	Labels []string
}

// Counter defines a counter.
func Counter(name, help string, labels ...string) *Def {
	return define(name, help, KindCounter, labels)
}

// Gauge defines a gauge.
func Gauge(name, help string, labels ...string) *Def {
	return define(name, help, KindGauge, labels)
}

// define checks the name and labels once, when the package defining them
// loads: a bad definition is a programming error, never a request's.
func define(name, help string, kind Kind, labels []string) *Def {
	d := &Def{Name: name, Help: help, Kind: kind, Labels: labels}
	values := make([]string, len(labels))
	if err := vm.ValidateMetric(d.sample(values)); err != nil {
		panic(fmt.Sprintf("metric: bad definition %s: %v", name, err))
	}
	return d
}

// sample is the series name for label values, labels in definition order
// (the library keeps the order it is given; clients and tests read
// `model` first).
func (d *Def) sample(values []string) string {
	if len(d.Labels) == 0 {
		return d.Name
	}
	var b strings.Builder
	b.WriteString(d.Name)
	b.WriteByte('{')
	for i, l := range d.Labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l)
		b.WriteString(`="`)
		writeLabelValue(&b, values[i])
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// writeLabelValue escapes a label value as the text format wants:
// backslash, double quote and line feed; a model's name may hold any of
// them.
func writeLabelValue(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
}

// writeHeader writes a family's HELP and TYPE lines. The library writes
// TYPE but no HELP text (its metadata is one process-wide switch), so the
// Page writes both from the Def and leaves the library's switch off.
func (d *Def) writeHeader(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", d.Name, d.Help, d.Name, d.Kind)
}
