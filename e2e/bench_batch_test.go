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
// the same requests sent one at a time to the same stack.
func BenchmarkBatch(b *testing.B) {
	const requests, lanes, maxTokens = 64, 8, 32
	st, err := app.Load(app.Options{ModelPath: benchModel(b), Lanes: lanes, Ctx: 16384, Threads: benchThreads, HostCache: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	doer := st.Doer("background")
	var in strings.Builder
	for i := range requests {
		fmt.Fprintf(&in, `{"custom_id":"r%d","method":"POST","url":"/v1/completions","body":{"prompt":"request %d: %s","max_tokens":%d,"temperature":0}}`+"\n",
			i, i, strings.Join(promptWords[i%len(promptWords):], " "), maxTokens)
	}
	reqs, err := batch.ReadInput(strings.NewReader(in.String()))
	if err != nil {
		b.Fatal(err)
	}
	run := func(name string, parallel int) batch.Progress {
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
	warm, _ := batch.ReadInput(strings.NewReader(`{"prompt":"warm up","max_tokens":8}` + "\n"))
	warmOut, _ := batch.OpenOutput(filepath.Join(b.TempDir(), "warm.jsonl"))
	(&batch.Runner{Doer: doer, Parallel: 1}).Run(context.Background(), warm, warmOut)
	warmOut.Close()
	b.ResetTimer()
	for range b.N {
		batched := run("batched", 2*lanes)
		alone := run("one-at-a-time", 1)
		b.ReportMetric(batched.TokensPerSecond(), "batch_tok/s")
		b.ReportMetric(alone.TokensPerSecond(), "single_tok/s")
		b.ReportMetric(batched.TokensPerSecond()/alone.TokensPerSecond(), "ratio")
	}
}
