package cgo

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"superfluid/engine"
)

// BenchmarkPrefillBesideResident measures what cached prefixes resident in
// the unified KV pool cost a cold prompt: a 2,000-token prompt prefilled
// in one plain llama_decode on contexts whose pool already holds 0, 2,000,
// 4,000 or 6,000 cells of another sequence (a cached conversation, as the
// prefix cache keeps them), alternating the contexts. llama.cpp attends
// over every cell below the highest one in use (n_kv) and masks the other
// sequences' cells: its flash-attention kernel skips a masked tile only
// after reading its mask, so each resident cell costs every prompt row a
// little. The share of attention in a step, and so the cost, is largest on
// mixture-of-experts models (few expert weights per token). Reported:
// tokens/s at each size and each one's ratio to the empty pool's.
func BenchmarkPrefillBesideResident(b *testing.B) {
	path := benchModel(b)
	const promptLen = 2000
	reps := benchReps(3)
	sizes := []int{0, 2000, 4000, 6000}
	rates := make([][]float64, len(sizes))
	runs := make([]func(), len(sizes))
	for i, n := range sizes {
		e, err := Open(Options{ModelPath: path, Ctx: 8192, Lanes: 1, Seqs: 2, Batch: 2048, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA")})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		if err := fillSequence(e, 1, n); err != nil {
			b.Fatal(err)
		}
		if _, err := e.PlainPrefill(64); err != nil { // warm up
			b.Fatal(err)
		}
		runs[i] = func() { rates[i] = append(rates[i], plainPrefillRate(b, e, promptLen)) }
	}
	b.ResetTimer()
	for range b.N {
		for r := range reps {
			inTurn(r, runs...)
		}
	}
	for i, n := range sizes {
		b.ReportMetric(median(rates[i]), fmt.Sprintf("resident%d-tok/s", n))
		if i > 0 {
			b.ReportMetric(median(ratios(rates[i], rates[0])), fmt.Sprintf("resident%d/0", n))
		}
	}
}

// fillSequence leaves n prompt tokens in sequence seq, prefilled through
// ticks of at most the batch, and retires the lane: the cells stay, as a
// cached prefix's do.
func fillSequence(e *Engine, seq int32, n int) error {
	if n == 0 {
		return nil
	}
	d := e.Descriptor()
	prompt := make([]engine.Token, n)
	for j := range prompt {
		prompt[j] = engine.Token((3 + j*11) % d.Vocab)
	}
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 9, Seq: seq, MaxTokens: 1, Sampling: engine.Greedy()}, prompt, nil)
	for at := 0; at < n; {
		chunk := min(n-at, d.Batch)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: 9, Offset: uint32(at), Count: uint32(chunk)})
		if _, err := e.Tick(&p); err != nil {
			return fmt.Errorf("fill sequence %d at %d: %w", seq, at, err)
		}
		at += chunk
		p.Reset()
	}
	p.Retires = append(p.Retires, 9)
	if _, err := e.Tick(&p); err != nil {
		return fmt.Errorf("fill sequence %d: retire: %w", seq, err)
	}
	return nil
}

// BenchmarkHostRoundTrip is the other side of keeping a cached prefix
// resident: moving a 2,000-token sequence to host memory (Export, Free)
// and back (Import), against prefilling 2,000 tokens on an empty pool,
// alternating. Reported: each one's milliseconds, and the round trip's
// share of the prefill.
func BenchmarkHostRoundTrip(b *testing.B) {
	path := benchModel(b)
	const n = 2000
	reps := benchReps(3)
	e, err := Open(Options{ModelPath: path, Ctx: 8192, Lanes: 1, Seqs: 2, Batch: 2048, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA")})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if err := fillSequence(e, 1, n); err != nil {
		b.Fatal(err)
	}
	var buf []byte
	var prefill, export, restore []float64
	roundTrip := func() {
		start := time.Now()
		out, err := e.Export(1, buf[:0])
		if err != nil {
			b.Fatal(err)
		}
		buf = out
		if err := e.Free(1); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := e.Import(1, buf); err != nil {
			b.Fatal(err)
		}
		export = append(export, mid.Sub(start).Seconds()*1000)
		restore = append(restore, time.Since(mid).Seconds()*1000)
	}
	b.ResetTimer()
	for range b.N {
		for r := range reps {
			inTurn(r, roundTrip, func() {
				// Sequence 1 is away during the prefill, as an entry in
				// host memory would be.
				out, err := e.Export(1, buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				buf = out
				if err := e.Free(1); err != nil {
					b.Fatal(err)
				}
				ns, err := e.PlainPrefill(n)
				if err != nil {
					b.Fatal(err)
				}
				prefill = append(prefill, float64(ns)/1e6)
				if _, err := e.Import(1, buf); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
	trip := make([]float64, len(export))
	for i := range trip {
		trip[i] = export[i] + restore[i]
	}
	b.ReportMetric(median(prefill), "prefill-ms")
	b.ReportMetric(median(export), "export-ms")
	b.ReportMetric(median(restore), "import-ms")
	b.ReportMetric(median(ratios(trip, prefill)), "roundtrip/prefill")
}

// BenchmarkEditHandOver is what an edit 15% from the end of a 2,000-token
// conversation copies out of the pool before its prefill (kv handsOver),
// the whole stream against the tail past the edit alone, each into fresh
// memory (the blobs are kept, as the host tier keeps them, so that none
// is written into pages an earlier one left); and what the original's next turn
// takes to come back: the whole stream imported against the kept prefix
// copied (shared cells) and the tail imported onto it.
func BenchmarkEditHandOver(b *testing.B) {
	path := benchModel(b)
	const n, keep = 2000, 1700
	reps := benchReps(5)
	e, err := Open(Options{ModelPath: path, Ctx: 8192, Lanes: 1, Seqs: 3, Batch: 2048, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA")})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if err := fillSequence(e, 1, n); err != nil {
		b.Fatal(err)
	}
	var wholeOut, tailOut, wholeIn, tailIn []float64
	var whole, tail []byte
	var kept [][]byte
	timed := func(into *[]float64, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start).Seconds()*1000)
	}
	b.ResetTimer()
	for range b.N {
		for r := range reps {
			inTurn(r, func() {
				timed(&wholeOut, func() (err error) { whole, err = e.Export(1, nil); return err })
			}, func() {
				timed(&tailOut, func() (err error) { tail, err = e.ExportTail(1, keep, nil); return err })
			})
			kept = append(kept, whole, tail)
			inTurn(r, func() {
				timed(&wholeIn, func() error { _, err := e.Import(2, whole); return err })
				e.Free(2)
			}, func() {
				timed(&tailIn, func() error {
					if err := e.CopyPrefix(1, 2, keep); err != nil {
						return err
					}
					_, err := e.ImportTail(2, tail)
					return err
				})
				e.Free(2)
			})
		}
	}
	runtime.KeepAlive(kept)
	b.ReportMetric(median(wholeOut), "whole-export-ms")
	b.ReportMetric(median(tailOut), "tail-export-ms")
	b.ReportMetric(median(ratios(tailOut, wholeOut)), "tail/whole-export")
	b.ReportMetric(median(wholeIn), "whole-import-ms")
	b.ReportMetric(median(tailIn), "tail-import-ms")
	b.ReportMetric(median(ratios(tailIn, wholeIn)), "tail/whole-import")
}
