package http

import (
	"runtime"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/metric"
	"superfluid/panics"
	"superfluid/sched"
)

// The server's own metrics, defined once; each component defines its own
// beside its counters (sched, kv, park, embed, panics).
var (
	// Under the Go collector's own name, so dashboards and the soak find it.
	goGoroutines = metric.Gauge("go_goroutines", "Number of goroutines that currently exist.")

	modelsLoaded          = metric.Gauge("superfluid_models_loaded", "Models loaded now.")
	modelBytes            = metric.Gauge("superfluid_model_bytes", "Memory a loaded model holds: weights, KV pool, host cache budget.", "model")
	modelKVBytesPerToken  = metric.Gauge("superfluid_model_kv_bytes_per_token", "KV cache bytes one context token takes (K and V of the attention layers llama.cpp allocates), at the model's cache types.", "model", "cache_type_k", "cache_type_v")
	modelRequestsInFlight = metric.Gauge("superfluid_model_requests_in_flight", "Requests holding a loaded model.", "model")
	modelTurnWaitsTotal   = metric.Counter("superfluid_model_turn_waits_total", "Steps that waited at the arbiter for another model's engine.", "model")
	modelTurnWaitSeconds  = metric.Counter("superfluid_model_turn_wait_seconds_total", "Time those steps waited.", "model")
	modelDecodeTokens     = metric.Counter("superfluid_model_decode_tokens_total", "Tokens generated, by model.", "model")

	fimShedTotal       = metric.Counter("superfluid_fim_shed_total", "Inline completions refused (429) past the FIM rate bucket.")
	fimSupersededTotal = metric.Counter("superfluid_fim_superseded_total", "Inline completions cancelled because the same client sent a newer one.")
)

// metrics renders /metrics in Prometheus' text format: the unlabelled
// samples (ours, and llama-server's llamacpp: names) are the model the
// request named (?model=), or the default one; the model_ families, and
// the gateway protocol's vllm: names, label every loaded model.
func (s *Server) metrics(ctx *fasthttp.RequestCtx, m *Model) error {
	p := metric.NewPage()
	var st sched.Snapshot // zero for an embedding model, which has no scheduler
	if m.Sched != nil {
		st = m.Sched.Stats()
	}
	st.AddTo(p)
	st.AddLlamaCppTo(p, s.scrapeRates(m.Name))
	s.cfg.Tracing.AddMetrics(p)
	panics.AddTo(p)
	p.Add(goGoroutines, float64(runtime.NumGoroutine()))
	if m.Cache != nil {
		m.Cache.AddMetrics(p)
	}
	if m.Embed != nil {
		m.Embed.AddMetrics(p)
	}
	if ms := s.registry(); ms != nil {
		loaded := ms.Loaded()
		addModelMetrics(p, loaded)
		addGatewayMetrics(p, loaded)
	}
	if s.cfg.Keys != nil {
		s.cfg.Keys.AddTo(p)
	}
	if g := s.cfg.FIMGate; g != nil {
		p.Add(fimShedTotal, float64(g.Shed()))
		p.Add(fimSupersededTotal, float64(g.Superseded()))
	}
	for _, add := range s.cfg.Metrics {
		add(p)
	}
	s.addSessionMetrics(p)
	ctx.SetContentType("text/plain; version=0.0.4")
	_, err := p.WriteTo(ctx)
	return err
}

// scrapeRates is what the previous scrape read of model's scheduler.
func (s *Server) scrapeRates(model string) *sched.ScrapeRates {
	if r, ok := s.rates.Load(model); ok {
		return r.(*sched.ScrapeRates)
	}
	r, _ := s.rates.LoadOrStore(model, new(sched.ScrapeRates))
	return r.(*sched.ScrapeRates)
}

// addGatewayMetrics adds the Gateway API Inference Extension's
// model-server protocol: queue, running requests and KV-cache use of every
// loaded generation model, and the server's adapters and cache shape.
func addGatewayMetrics(p *metric.Page, loaded []LoadedModel) {
	var capacity int64
	for _, lm := range loaded {
		if lm.Model.Sched == nil {
			continue // an embedding model: no lanes, no queue
		}
		st := lm.Model.Sched.Stats()
		st.AddGatewayTo(p, lm.Model.Name)
		capacity = max(capacity, st.KVCapacity)
	}
	sched.AddGatewayServerTo(p, capacity, time.Now())
}

// addModelMetrics adds what every loaded model holds, labelled by model.
func addModelMetrics(p *metric.Page, loaded []LoadedModel) {
	p.Add(modelsLoaded, float64(len(loaded)))
	for _, lm := range loaded {
		name := lm.Model.Name
		p.Add(modelBytes, float64(lm.Size), name)
		if d := lm.Model.Desc; d != nil {
			p.Add(modelKVBytesPerToken, float64(d.KVBytesPerToken), name, d.CacheTypeK, d.CacheTypeV)
		}
		p.Add(modelRequestsInFlight, float64(lm.InFlight), name)
		var st sched.Snapshot // an embedding model has none: zeros
		if lm.Model.Sched != nil {
			st = lm.Model.Sched.Stats()
		}
		p.Add(modelTurnWaitsTotal, float64(st.TurnWaits), name)
		p.Add(modelTurnWaitSeconds, float64(st.TurnWaitMS)/1000, name)
		p.Add(modelDecodeTokens, float64(st.DecodeTokens), name)
	}
}
