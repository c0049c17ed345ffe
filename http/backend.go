package http

import (
	"superfluid/metric"
	"superfluid/task"
)

// Text and Scheduler are the request core's (task): what the handlers
// need of a model's vocabulary and of its scheduler.
type (
	Text      = task.Text
	Scheduler = task.Scheduler
	Embedder  = task.Embedder
)

// CacheView reports what the prefix cache holds, for /metrics and the
// status endpoints; nil when there is none.
type CacheView interface {
	// AddMetrics adds the cache's samples to a /metrics scrape.
	AddMetrics(p *metric.Page)
}

// Model is a loaded model with everything the handlers need around it:
// the request core's Model (what generation and embedding know of it), and
// what only the transport uses — the cache's metrics.
type Model struct {
	task.Model
	Cache CacheView // may be nil
}
