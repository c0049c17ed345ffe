package metric

import (
	"bytes"
	"fmt"
	"io"

	vm "github.com/VictoriaMetrics/metrics"
)

// Page is one scrape of /metrics: the families added, in the order they
// were first added, each a set of the library's that renders its samples.
// A Page is built and written by one goroutine.
type Page struct {
	families []*family
	byName   map[string]*family
}

type family struct {
	def  *Def
	sets []*vm.Set // a histogram's own set, or the one set of its samples
}

// NewPage starts a scrape.
func NewPage() *Page { return &Page{byName: map[string]*family{}} }

// family finds a family by name, so two definitions of one name (a test's
// stand-in beside the real one) still give one HELP and TYPE: the first
// added speaks for it.
func (p *Page) family(d *Def) *family {
	f := p.byName[d.Name]
	if f == nil {
		f = &family{def: d}
		p.byName[d.Name] = f
		p.families = append(p.families, f)
	}
	return f
}

// Add sets a counter's or gauge's sample for the label values, given in
// the Def's label order. A value read from a plain counter at scrape
// time is how per-token counters reach /metrics. A sample added twice
// keeps its first value, as a scrape must not carry one series twice.
func (p *Page) Add(d *Def, v float64, labelValues ...string) {
	if len(labelValues) != len(d.Labels) {
		panic(fmt.Sprintf("metric: %s takes %d label values, got %d", d.Name, len(d.Labels), len(labelValues)))
	}
	if d.Kind == KindHistogram {
		panic("metric: " + d.Name + " is a histogram: AddHistogram")
	}
	f := p.family(d)
	if len(f.sets) == 0 {
		f.sets = append(f.sets, vm.NewSet())
	}
	// A gauge whose callback returns the value read: the library writes
	// whole numbers without an exponent, as counters need.
	f.sets[0].GetOrCreateGauge(d.sample(labelValues), func() float64 { return v })
}

// AddHistogram adds a histogram's buckets, sum and count as they stand.
func (p *Page) AddHistogram(h *Histogram) {
	f := p.family(h.def)
	f.sets = append(f.sets, h.set)
}

// WriteTo renders the page: each family's HELP and TYPE, then its
// samples as the library writes them.
func (p *Page) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	for _, f := range p.families {
		f.def.writeHeader(&b)
		for _, s := range f.sets {
			s.WritePrometheus(&b)
		}
	}
	return b.WriteTo(w)
}
