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
// the scheduler (submit to first token, one lane) against one plain
// llama_decode of it at llama-bench's defaults (n_batch 2048, n_ubatch 512;
// sf_bench_plain_prefill, as cgo's BenchmarkPrefill); §9 aims at ≥ 0.95×
// of it. The scheduler runs twice: with a batch that holds the prompt
// (serve's default, 2048; a Chat prompt that fits runs in one step) and at
// --batch 64 (32 steps, the CPU default before steps were sized by time).
// Three rounds,
// alternating, the median of each.
func BenchmarkLonePrefill(b *testing.B) {
	path := benchModel(b)
	const promptLen, rounds = 2000, 3
	var raw, tick, tick64 []float64
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
			tick = append(tick, promptLen/schedPrefill(b, path, promptLen, prefillBatch).Seconds())
			tick64 = append(tick64, promptLen/schedPrefill(b, path, promptLen, 64).Seconds())
		}
	}
	slices.Sort(raw)
	slices.Sort(tick)
	slices.Sort(tick64)
	r, s, s64 := raw[len(raw)/2], tick[len(tick)/2], tick64[len(tick64)/2]
	b.ReportMetric(r, "raw-prefill-tok/s")
	b.ReportMetric(s, "sched-prefill-tok/s")
	b.ReportMetric(s/r, "sched-vs-raw-x")
	b.ReportMetric(s64, "sched-batch64-tok/s")
	b.ReportMetric(s64/r, "sched-batch64-vs-raw-x")
}

// prefillBatch holds the whole prompt: one step, as one plain call.
const prefillBatch = 2048

// schedPrefill is a lone request's time from Submit to its first token.
func schedPrefill(b *testing.B, path string, promptLen, batch int) time.Duration {
	st := newSchedStack(b, stackConfig{model: path, lanes: 1, seqs: 2, threads: benchThreads, batch: batch})
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
