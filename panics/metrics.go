package panics

import "superfluid/metric"

var panicsTotal = metric.Counter("superfluid_panics_total", "Panics recovered, by component: each failed only the work at fault.", "component")

// AddTo adds the panics recovered, by component, to a scrape.
func AddTo(p *metric.Page) {
	Each(func(c Component, n uint64) { p.Add(panicsTotal, float64(n), c.String()) })
}
