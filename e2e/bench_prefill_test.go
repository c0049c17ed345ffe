package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"superfluid/cgo"
	"superfluid/sched"
)

// BenchmarkLonePrefill: a lone 2,000-token prompt's prefill rate through
// the scheduler (submit to first token, one lane, a batch that holds the
// prompt) against one plain llama_decode of it on the same model and batch
// (sf_bench_plain_prefill, as cgo's BenchmarkPrefill); §9 aims at ≥ 0.95×
// of it. Three rounds, alternating, the median of each.
func BenchmarkLonePrefill(b *testing.B) {
	path := benchModel(b)
	const promptLen, rounds = 2000, 3
	var raw, tick []float64
	for range b.N {
		for range rounds {
			e, err := cgo.Open(cgo.Options{ModelPath: path, Ctx: 4096, Lanes: 1, Seqs: 1, Batch: prefillBatch, Threads: benchThreads})
			if err != nil {
				b.Fatal(err)
			}
			ns, err := e.PlainPrefill(promptLen)
			e.Close()
			if err != nil {
				b.Fatal(err)
			}
			raw = append(raw, promptLen/(float64(ns)/1e9))
			tick = append(tick, promptLen/schedPrefill(b, path, promptLen).Seconds())
		}
	}
	slices.Sort(raw)
	slices.Sort(tick)
	r, s := raw[len(raw)/2], tick[len(tick)/2]
	b.ReportMetric(r, "raw-prefill-tok/s")
	b.ReportMetric(s, "sched-prefill-tok/s")
	b.ReportMetric(s/r, "sched-vs-raw-x")
}

// prefillBatch holds the whole prompt: one step, as one plain call.
const prefillBatch = 2048

// schedPrefill is a lone request's time from Submit to its first token.
func schedPrefill(b *testing.B, path string, promptLen int) time.Duration {
	st := newSchedStack(b, stackConfig{model: path, lanes: 1, seqs: 2, threads: benchThreads, batch: prefillBatch})
	defer st.close(b)
	prompt := textTokens(b, st.eng.Engine, promptLen, 4000)
	start := time.Now()
	s, err := st.s.Submit(context.Background(), sched.Request{Prompt: prompt, Class: sched.Chat, MaxTokens: 1})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Next(context.Background()); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}
