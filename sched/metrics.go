package sched

import "superfluid/metric"

// The scheduler's metrics, defined once. The counters stay plain atomics
// the runner bumps per step and per token; a scrape reads them from a
// Snapshot (AddTo), so the hot path owes the metrics library nothing.
var (
	ticksTotal             = metric.Counter("superfluid_ticks_total", "Engine ticks that carried work.")
	prefillTokensTotal     = metric.Counter("superfluid_prefill_tokens_total", "Prompt tokens prefilled.")
	decodeTokensTotal      = metric.Counter("superfluid_decode_tokens_total", "Tokens generated.")
	warmPrefixTokensTotal  = metric.Counter("superfluid_warm_prefix_tokens_total", "Prompt tokens found in the prefix cache at admission.")
	admissionsTotal        = metric.Counter("superfluid_admissions_total", "Lanes admitted.")
	coldAdmissionsTotal    = metric.Counter("superfluid_cold_admissions_total", "Admissions that found nothing cached.")
	preemptionsTotal       = metric.Counter("superfluid_preemptions_total", "Lanes preempted for a better class.")
	starvationGrantsTotal  = metric.Counter("superfluid_starvation_grants_total", "Grants to lanes that had starved.")
	sharedPrefixHoldsTotal = metric.Counter("superfluid_shared_prefix_holds_total", "Admissions held for a shared prefix.")
	kvFullTotal            = metric.Counter("superfluid_kv_full_total", "Ticks stopped by a full KV pool.")
	tickErrorsTotal        = metric.Counter("superfluid_tick_errors_total", "Ticks the engine failed.")
	cancelledTotal         = metric.Counter("superfluid_requests_cancelled_total", "Requests cancelled.")
	expiredTotal           = metric.Counter("superfluid_requests_expired_total", "Requests past their deadline.")
	completedTotal         = metric.Counter("superfluid_requests_completed_total", "Requests ended.")
	grammarFastTotal       = metric.Counter("superfluid_grammar_fast_tokens_total", "Tokens under a grammar where the model's own choice was allowed (one token checked).")
	grammarMaskedTotal     = metric.Counter("superfluid_grammar_masked_tokens_total", "Tokens under a grammar sampled after masking the vocabulary.")
	draftTokensTotal       = metric.Counter("superfluid_draft_tokens_total", "Draft tokens speculative decoding verified, by draft source.", "source")
	draftAcceptedTotal     = metric.Counter("superfluid_draft_accepted_tokens_total", "Draft tokens accepted, by draft source.", "source")
	draftGateClosedTotal   = metric.Counter("superfluid_draft_gate_closed_total", "Times a lane's throughput gate stopped its drafts (they did not pay); it probes again later.")
	pressureParksTotal     = metric.Counter("superfluid_pressure_parked_lanes_total", "Background lanes preempted into the disk tier at critical memory pressure.")
	pressureEvictedTotal   = metric.Counter("superfluid_pressure_evicted_bytes_total", "Bytes of cached state evicted from host memory and the KV pool for memory pressure.")
	lanesActive            = metric.Gauge("superfluid_lanes_active", "Lanes running now.")
	prefillBudgetTokens    = metric.Gauge("superfluid_prefill_budget_tokens", "The last tick's prompt budget.")
	queueDepth             = metric.Gauge("superfluid_queue_depth", "Requests waiting for a lane, by class.", "class")

	// ttftSeconds keeps the buckets /metrics always had (5 ms to 40 s),
	// now one histogram per class (sum by le for the old series).
	ttftSeconds = metric.NewHistogramDef("superfluid_ttft_seconds", "Time from submission to the first token, by class.",
		[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40}, "class")
	// itlSeconds: a CPU decode step of a small model is a few ms, of a
	// large one or a step beside a prefill chunk up to seconds.
	itlSeconds = metric.NewHistogramDef("superfluid_itl_seconds", "Time between two tokens delivered to a request (inter-token latency), by class.",
		[]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}, "class")
)

// AddTo adds the snapshot's samples to a scrape. A zero Snapshot (an
// embedding model has no scheduler) adds zeros and no histogram
// observations.
func (s Snapshot) AddTo(p *metric.Page) {
	for _, c := range []struct {
		def *metric.Def
		v   uint64
	}{
		{ticksTotal, s.Ticks},
		{prefillTokensTotal, s.PrefillTokens},
		{decodeTokensTotal, s.DecodeTokens},
		{warmPrefixTokensTotal, s.WarmPrefixTokens},
		{admissionsTotal, s.Admissions},
		{coldAdmissionsTotal, s.ColdAdmissions},
		{preemptionsTotal, s.Preemptions},
		{starvationGrantsTotal, s.StarvationGrants},
		{sharedPrefixHoldsTotal, s.SharedPrefixHolds},
		{kvFullTotal, s.KVFull},
		{tickErrorsTotal, s.TickErrors},
		{cancelledTotal, s.Cancelled},
		{expiredTotal, s.Expired},
		{completedTotal, s.Completed},
		{grammarFastTotal, s.GrammarFastTokens},
		{grammarMaskedTotal, s.GrammarMaskedTokens},
		{draftGateClosedTotal, s.DraftGateClosed},
		{pressureParksTotal, s.PressureParks},
		{pressureEvictedTotal, s.PressureEvictedBytes},
	} {
		p.Add(c.def, float64(c.v))
	}
	source := s.DraftSource
	if source == "" {
		source = SpecNgramSimple
	}
	p.Add(draftTokensTotal, float64(s.DraftTokens), string(source))
	p.Add(draftAcceptedTotal, float64(s.DraftAccepted), string(source))
	p.Add(lanesActive, float64(s.LanesActive))
	p.Add(prefillBudgetTokens, float64(s.PrefillBudget))
	for c := range NumClasses {
		p.Add(queueDepth, float64(s.QueueDepth[c]), Class(c).String())
	}
	for c := range NumClasses {
		if s.TTFT != nil {
			p.AddHistogram(s.TTFT[c])
		} else {
			p.AddHistogram(ttftSeconds.New(Class(c).String())) // all zeros, as before
		}
	}
	for c := range NumClasses {
		if s.ITL != nil {
			p.AddHistogram(s.ITL[c])
		} else {
			p.AddHistogram(itlSeconds.New(Class(c).String()))
		}
	}
}
