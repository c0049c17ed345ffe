package task

import (
	"context"

	"superfluid/engine"
	"superfluid/metric"
	"superfluid/sched"
)

// Embedder is the embedding runner (embed.Runner) as the APIs use it;
// Model.Embed is nil for a generation model.
type Embedder interface {
	// Embed returns each input's pooled vector, not normalized.
	Embed(ctx context.Context, inputs [][]engine.Token, c sched.Class) ([][]float32, error)
	// MaxInputTokens is the most tokens one input may have.
	MaxInputTokens() int
	// Dim is the length of a vector.
	Dim() int
	// AddMetrics adds the runner's samples to a /metrics scrape.
	AddMetrics(p *metric.Page)
}
