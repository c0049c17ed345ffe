package http

import "superfluid/task"

// Text and Scheduler are the request core's (task): what the handlers
// need of a model's vocabulary and of its scheduler.
type (
	Text      = task.Text
	Scheduler = task.Scheduler
)

// CacheView reports what the prefix cache holds, for /metrics and the
// status endpoints; nil when there is none.
type CacheView interface {
	Metrics() []Metric
}

// Metric is one Prometheus sample a component contributes to /metrics.
type Metric struct {
	Name, Help, Type string // Type: counter or gauge
	Labels           string // `name="value",…` without braces, or ""
	Value            float64
}

// Model is a loaded model with everything the handlers need around it:
// the request core's Model (what generation knows of it), and what only
// the transport uses — the embedding runner and the cache's metrics.
type Model struct {
	task.Model
	Embed Embedder  // nil for a generation model
	Cache CacheView // may be nil
}
