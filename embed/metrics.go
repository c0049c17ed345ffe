package embed

import "superfluid/metric"

// The embedding runner's metrics, defined once.
var (
	callsTotal   = metric.Counter("superfluid_embed_calls_total", "Embedding engine calls (one llama_decode each).")
	inputsTotal  = metric.Counter("superfluid_embed_inputs_total", "Inputs embedded.")
	tokensTotal  = metric.Counter("superfluid_embed_tokens_total", "Tokens embedded.")
	queuedInputs = metric.Gauge("superfluid_embed_queued_inputs", "Embedding inputs waiting or running.")
)

// AddMetrics adds the runner's samples to a scrape. Any goroutine.
func (r *Runner) AddMetrics(p *metric.Page) {
	st := r.Stats()
	p.Add(callsTotal, float64(st.Calls.Load()))
	p.Add(inputsTotal, float64(st.Inputs.Load()))
	p.Add(tokensTotal, float64(st.Tokens.Load()))
	p.Add(queuedInputs, float64(st.Queued.Load()))
}
