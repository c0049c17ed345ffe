package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/app"
	"superfluid/batch"
)

// BenchmarkBatch: generated tokens/s of a 64-request batch run the way
// `superfluid batch --model` runs it (a stack loaded in-process, requests
// dispatched in the background class, twice the lanes in flight), against
// the same requests sent one at a time to the same stack. Two workloads:
// prompts of 60–190 tokens with 32-token answers (prefill-bound), and
// prompts of about 12 tokens with 128-token answers (decode-bound).
func BenchmarkBatch(b *testing.B) {
	const requests, lanes = 64, 8
	st, err := app.Load(app.Options{ModelPath: benchModel(b), Lanes: lanes, Ctx: 16384, Threads: benchThreads, HostCache: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	doer := st.Doer("background")
	run := func(b *testing.B, name string, reqs []batch.Request, parallel int) batch.Progress {
		out, err := batch.OpenOutput(filepath.Join(b.TempDir(), name+".jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		p, err := (&batch.Runner{Doer: doer, Parallel: parallel}).Run(context.Background(), reqs, out)
		if err != nil || p.Failed > 0 {
			b.Fatalf("%s: %+v, %v", name, p, err)
		}
		b.Logf("%s: %s", name, p.Summary())
		return p
	}
	// The first ticks of a fresh engine size its buffers; neither side
	// should pay for that.
	run(b, "warm-up", batchBenchRequests(b, 1, 8, 8), 1)

	for _, w := range []struct {
		name             string
		words, maxTokens int
	}{{"prompt=60-190,gen=32", 0, 32}, {"prompt=12,gen=128", 8, 128}} {
		b.Run(w.name, func(b *testing.B) {
			reqs := batchBenchRequests(b, requests, w.words, w.maxTokens)
			for range b.N {
				batched := run(b, "batched", reqs, 2*lanes)
				alone := run(b, "one-at-a-time", reqs, 1)
				b.ReportMetric(batched.TokensPerSecond(), "batch_tok/s")
				b.ReportMetric(alone.TokensPerSecond(), "single_tok/s")
				b.ReportMetric(batched.TokensPerSecond()/alone.TokensPerSecond(), "ratio")
			}
		})
	}
}

// batchBenchRequests makes n distinct greedy completions; words 0 gives
// each a different tail of promptWords (long prompts), else that many
// words.
func batchBenchRequests(b *testing.B, n, words, maxTokens int) []batch.Request {
	var in strings.Builder
	for i := range n {
		text := promptWords[i%len(promptWords):]
		if words > 0 {
			text = make([]string, words)
			for j := range text {
				text[j] = promptWords[(i*7+j*3)%len(promptWords)]
			}
		}
		fmt.Fprintf(&in, `{"custom_id":"r%d","method":"POST","url":"/v1/completions","body":{"prompt":"request %d: %s","max_tokens":%d,"temperature":0}}`+"\n",
			i, i, strings.Join(text, " "), maxTokens)
	}
	reqs, err := batch.ReadInput(strings.NewReader(in.String()))
	if err != nil {
		b.Fatal(err)
	}
	return reqs
}
