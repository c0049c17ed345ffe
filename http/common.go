package http

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"superfluid/panics"
	"superfluid/sched"
)

func commonRoutes() map[string]route {
	return map[string]route{
		"/health":  {method: "GET", kind: apiLlama, handler: (*Server).health, public: true, loading: true},
		"/metrics": {method: "GET", kind: apiLlama, handler: (*Server).metrics},
	}
}

// health answers 503 while the model loads and 200 once it serves, as
// llama.cpp's server does (editors poll it before their first request).
func (s *Server) health(ctx *fasthttp.RequestCtx, _ *Model) error {
	if s.registry() == nil {
		return &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "unavailable_error", Msg: "Loading model"}
	}
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"status":"ok"}`)
	return nil
}

// metrics renders the scheduler's and the cache's counters in Prometheus'
// text format.
func (s *Server) metrics(ctx *fasthttp.RequestCtx, m *Model) error {
	var b strings.Builder
	var st sched.Snapshot // zero for an embedding model, which has no scheduler
	if m.Sched != nil {
		st = m.Sched.Stats()
	}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(&b, "# HELP superfluid_%s %s\n# TYPE superfluid_%s counter\nsuperfluid_%s %d\n", name, help, name, name, v)
	}
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(&b, "# HELP superfluid_%s %s\n# TYPE superfluid_%s gauge\nsuperfluid_%s %d\n", name, help, name, name, v)
	}
	counter("ticks_total", "Engine ticks that carried work.", st.Ticks)
	counter("prefill_tokens_total", "Prompt tokens prefilled.", st.PrefillTokens)
	counter("decode_tokens_total", "Tokens generated.", st.DecodeTokens)
	counter("warm_prefix_tokens_total", "Prompt tokens found in the prefix cache at admission.", st.WarmPrefixTokens)
	counter("admissions_total", "Lanes admitted.", st.Admissions)
	counter("cold_admissions_total", "Admissions that found nothing cached.", st.ColdAdmissions)
	counter("preemptions_total", "Lanes preempted for a better class.", st.Preemptions)
	counter("starvation_grants_total", "Grants to lanes that had starved.", st.StarvationGrants)
	counter("shared_prefix_holds_total", "Admissions held for a shared prefix.", st.SharedPrefixHolds)
	counter("kv_full_total", "Ticks stopped by a full KV pool.", st.KVFull)
	counter("tick_errors_total", "Ticks the engine failed.", st.TickErrors)
	counter("requests_cancelled_total", "Requests cancelled.", st.Cancelled)
	counter("requests_expired_total", "Requests past their deadline.", st.Expired)
	counter("requests_completed_total", "Requests ended.", st.Completed)
	counter("grammar_fast_tokens_total", "Tokens under a grammar where the model's own choice was allowed (one token checked).", st.GrammarFastTokens)
	counter("grammar_masked_tokens_total", "Tokens under a grammar sampled after masking the vocabulary.", st.GrammarMaskedTokens)
	b.WriteString("# HELP superfluid_draft_tokens_total Draft tokens speculative decoding verified, by draft source.\n# TYPE superfluid_draft_tokens_total counter\n")
	fmt.Fprintf(&b, "superfluid_draft_tokens_total{source=%q} %d\n", sched.SpecNgramSimple, st.DraftTokens)
	b.WriteString("# HELP superfluid_draft_accepted_tokens_total Draft tokens accepted, by draft source.\n# TYPE superfluid_draft_accepted_tokens_total counter\n")
	fmt.Fprintf(&b, "superfluid_draft_accepted_tokens_total{source=%q} %d\n", sched.SpecNgramSimple, st.DraftAccepted)
	counter("draft_gate_closed_total", "Times a lane's throughput gate stopped its drafts (they did not pay); it probes again later.", st.DraftGateClosed)
	b.WriteString("# HELP superfluid_panics_total Panics recovered, by component: each failed only the work at fault.\n# TYPE superfluid_panics_total counter\n")
	panics.Each(func(c panics.Component, n uint64) {
		fmt.Fprintf(&b, "superfluid_panics_total{component=%q} %d\n", c, n)
	})
	gauge("lanes_active", "Lanes running now.", st.LanesActive)
	// Under the Go collector's own name, so dashboards and the soak find it.
	fmt.Fprintf(&b, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	gauge("prefill_budget_tokens", "The last tick's prompt budget.", st.PrefillBudget)
	b.WriteString("# HELP superfluid_queue_depth Requests waiting for a lane, by class.\n# TYPE superfluid_queue_depth gauge\n")
	for c := range sched.NumClasses {
		fmt.Fprintf(&b, "superfluid_queue_depth{class=%q} %d\n", sched.Class(c).String(), st.QueueDepth[c])
	}
	b.WriteString("# HELP superfluid_ttft_seconds Time from submission to the first token.\n# TYPE superfluid_ttft_seconds histogram\n")
	var cum uint64
	for i, bound := range sched.TTFTBucketsMS {
		cum += st.TTFTBuckets[i]
		fmt.Fprintf(&b, "superfluid_ttft_seconds_bucket{le=%q} %d\n", strconv.FormatFloat(float64(bound)/1000, 'g', -1, 64), cum)
	}
	cum += st.TTFTBuckets[len(sched.TTFTBucketsMS)]
	fmt.Fprintf(&b, "superfluid_ttft_seconds_bucket{le=\"+Inf\"} %d\nsuperfluid_ttft_seconds_sum %g\nsuperfluid_ttft_seconds_count %d\n",
		cum, float64(st.TTFTSumMS)/1000, st.TTFTCount)
	var parts []Metric
	if m.Cache != nil {
		parts = append(parts, m.Cache.Metrics()...)
	}
	if m.Embed != nil {
		parts = append(parts, m.Embed.Metrics()...)
	}
	{
		seen := map[string]bool{}
		for _, x := range parts {
			name := "superfluid_" + x.Name
			if !seen[name] {
				fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, x.Help, name, x.Type)
				seen[name] = true
			}
			if x.Labels != "" {
				fmt.Fprintf(&b, "%s{%s} %g\n", name, x.Labels, x.Value)
			} else {
				fmt.Fprintf(&b, "%s %g\n", name, x.Value)
			}
		}
	}
	if ms := s.registry(); ms != nil {
		writeModelMetrics(&b, ms.Loaded())
	}
	ctx.SetContentType("text/plain; version=0.0.4")
	ctx.SetBodyString(b.String())
	return nil
}

// writeModelMetrics adds what every loaded model holds, labelled by model;
// the samples above are the model the request named (?model=), or the
// default one.
func writeModelMetrics(b *strings.Builder, loaded []LoadedModel) {
	fmt.Fprintf(b, "# HELP superfluid_models_loaded Models loaded now.\n# TYPE superfluid_models_loaded gauge\nsuperfluid_models_loaded %d\n", len(loaded))
	b.WriteString("# HELP superfluid_model_bytes Memory a loaded model holds: weights, KV pool, host cache budget.\n# TYPE superfluid_model_bytes gauge\n")
	for _, lm := range loaded {
		fmt.Fprintf(b, "superfluid_model_bytes{model=%q} %d\n", lm.Model.Name, lm.Size)
	}
	b.WriteString("# HELP superfluid_model_kv_bytes_per_token KV cache bytes one context token takes (K and V, every layer), at the model's cache types.\n# TYPE superfluid_model_kv_bytes_per_token gauge\n")
	for _, lm := range loaded {
		if d := lm.Model.Desc; d != nil {
			fmt.Fprintf(b, "superfluid_model_kv_bytes_per_token{model=%q,cache_type_k=%q,cache_type_v=%q} %d\n", lm.Model.Name, d.CacheTypeK, d.CacheTypeV, d.KVBytesPerToken)
		}
	}
	b.WriteString("# HELP superfluid_model_requests_in_flight Requests holding a loaded model.\n# TYPE superfluid_model_requests_in_flight gauge\n")
	for _, lm := range loaded {
		fmt.Fprintf(b, "superfluid_model_requests_in_flight{model=%q} %d\n", lm.Model.Name, lm.InFlight)
	}
	stats := make([]sched.Snapshot, len(loaded))
	for i, lm := range loaded {
		if lm.Model.Sched != nil { // an embedding model has none: zeros
			stats[i] = lm.Model.Sched.Stats()
		}
	}
	b.WriteString("# HELP superfluid_model_turn_waits_total Steps that waited at the arbiter for another model's engine.\n# TYPE superfluid_model_turn_waits_total counter\n")
	for i, lm := range loaded {
		fmt.Fprintf(b, "superfluid_model_turn_waits_total{model=%q} %d\n", lm.Model.Name, stats[i].TurnWaits)
	}
	b.WriteString("# HELP superfluid_model_turn_wait_seconds_total Time those steps waited.\n# TYPE superfluid_model_turn_wait_seconds_total counter\n")
	for i, lm := range loaded {
		fmt.Fprintf(b, "superfluid_model_turn_wait_seconds_total{model=%q} %g\n", lm.Model.Name, float64(stats[i].TurnWaitMS)/1000)
	}
	b.WriteString("# HELP superfluid_model_decode_tokens_total Tokens generated, by model.\n# TYPE superfluid_model_decode_tokens_total counter\n")
	for i, lm := range loaded {
		fmt.Fprintf(b, "superfluid_model_decode_tokens_total{model=%q} %d\n", lm.Model.Name, stats[i].DecodeTokens)
	}
}
