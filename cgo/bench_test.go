package cgo

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"superfluid/engine"
)

// benchModel is the model the engine benchmarks run on: SF_BENCH_MODEL
// (`make bench` generates the 0.5B-shaped synthetic model), else the tiny one.
func benchModel(b *testing.B) string {
	if p := os.Getenv("SF_BENCH_MODEL"); p != "" {
		return p
	}
	b.Logf("SF_BENCH_MODEL unset: benchmarking the tiny test model (make bench uses the 0.5b shape)")
	return tinyModel(b)
}

// benchReps is how many alternating rounds a benchmark takes the median
// of: SF_BENCH_REPS when set (fewer for a quick look on a slow machine),
// else def.
func benchReps(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SF_BENCH_REPS")); err == nil && n > 0 {
		return n
	}
	return def
}

// median is the middle of the rates a benchmark's alternating rounds
// measured (v keeps its order: rounds are paired by index).
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// inTurn runs the measurements of one alternating round: in the given
// order on even rounds, reversed on odd ones, so that whatever favours the
// first (or second) run of a round — caches, the clock, a neighbour's
// load — falls on each side alike.
func inTurn(round int, runs ...func()) {
	for i := range runs {
		if round%2 == 1 {
			i = len(runs) - 1 - i
		}
		runs[i]()
	}
}

// ratios is each round's a/b: paired within a round, they cancel the
// machine's drift between rounds better than a ratio of medians does.
func ratios(a, b []float64) []float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return r
}

// plainPrefillRate is the prompt tokens/s of one plain llama_decode of a
// promptLen-token prompt.
func plainPrefillRate(b *testing.B, e *Engine, promptLen int) float64 {
	ns, err := e.PlainPrefill(promptLen)
	if err != nil {
		b.Fatal(err)
	}
	return float64(promptLen) / (float64(ns) / 1e9)
}

// plainDecodeRate is the tokens/s of the plain decode loop: lanes streams,
// n tokens each after a promptLen-token prompt.
func plainDecodeRate(b *testing.B, e *Engine, lanes, promptLen, n int) float64 {
	ns, err := e.PlainDecodeLoop(lanes, promptLen, n)
	if err != nil {
		b.Fatal(err)
	}
	return float64(lanes*n) / (float64(ns) / 1e9)
}

// tickDecode admits lanes with promptLen-token prompts, prefills them, then
// times n decode ticks (one token per lane each): the whole of each Tick
// call, and the llama_decode inside it.
func tickDecode(b *testing.B, e *Engine, lanes, promptLen, n int) (spent, decoding time.Duration) {
	var p engine.Plan
	for i := range lanes {
		prompt := make([]engine.Token, promptLen)
		for j := range prompt {
			prompt[j] = engine.Token((1 + i*31 + j*7) % e.Descriptor().Vocab)
		}
		p.AddAdmit(engine.Admit{Lane: uint32(i), Seq: int32(i), MaxTokens: uint32(n + 1), Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: uint32(i), Count: uint32(promptLen)})
	}
	if _, err := e.Tick(&p); err != nil {
		b.Fatal(err)
	}
	for range n {
		p.Reset()
		for i := range lanes {
			p.Decodes = append(p.Decodes, engine.Decode{Lane: uint32(i)})
		}
		start := time.Now()
		ev, err := e.Tick(&p)
		if err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		decoding += time.Duration(ev.Timings.StepNS)
	}
	p.Reset()
	for i := range lanes {
		p.Retires = append(p.Retires, uint32(i))
	}
	if _, err := e.Tick(&p); err != nil {
		b.Fatal(err)
	}
	for i := range lanes {
		e.Free(int32(i))
	}
	return spent, decoding
}

// BenchmarkDecode compares decoding through sf_tick with a plain C loop over
// llama_decode on the same context, alternating the two to share the
// machine's noise. Reported: tokens/s of each, and tick/plain paired per round.
func BenchmarkDecode(b *testing.B) {
	path := benchModel(b)
	threads := runtime.NumCPU()
	for _, lanes := range []int{1, 8} {
		{
			b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
				e, err := Open(Options{ModelPath: path, Ctx: 2048, Lanes: lanes, Seqs: lanes, Batch: 512, Threads: threads, FlashAttn: os.Getenv("SF_FA")})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				const promptLen, n = 32, 64
				reps := benchReps(5)
				var plain, tick, inDecode []float64
				tickDecode(b, e, lanes, promptLen, 8) // warm up
				b.ResetTimer()
				for range b.N {
					for r := range reps {
						inTurn(r, func() {
							plain = append(plain, plainDecodeRate(b, e, lanes, promptLen, n))
						}, func() {
							d, dec := tickDecode(b, e, lanes, promptLen, n)
							tick = append(tick, float64(lanes*n)/d.Seconds())
							inDecode = append(inDecode, float64(lanes*n)/dec.Seconds())
						})
					}
				}
				b.Logf("tok/s by round: plain %.1f, tick %.1f", plain, tick) // the noise the medians hide
				b.ReportMetric(median(plain), "plain-tok/s")
				b.ReportMetric(median(tick), "tick-tok/s")
				// The tick's rate counting only its llama_decode: where it
				// is near tick-tok/s, the gap to plain is inside llama.cpp.
				b.ReportMetric(median(inDecode), "tick-llama-tok/s")
				b.ReportMetric(median(ratios(tick, plain)), "tick/plain")
			})
		}
	}
}

// BenchmarkPrefill compares a 2,000-token prompt prefilled by one tick (one
// prefill of the whole prompt) with one plain llama_decode call of the same
// tokens, alternating the two. Reported: prompt tokens/s of each.
func BenchmarkPrefill(b *testing.B) {
	path := benchModel(b)
	const promptLen = 2000
	reps := benchReps(3)
	e, err := Open(Options{ModelPath: path, Ctx: 4096, Lanes: 1, Seqs: 2, Batch: 2048, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA")})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	prompt := make([]engine.Token, promptLen)
	for j := range prompt {
		prompt[j] = engine.Token((1 + j*7) % e.Descriptor().Vocab)
	}
	// tickPrefill returns the Tick call's time and its llama_decode's.
	tickPrefill := func() (time.Duration, time.Duration) {
		var p engine.Plan
		p.AddAdmit(engine.Admit{Lane: 1, Seq: 1, MaxTokens: 1, Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: promptLen})
		start := time.Now()
		ev, err := e.Tick(&p)
		if err != nil {
			b.Fatal(err)
		}
		d, dec := time.Since(start), time.Duration(ev.Timings.StepNS)
		p.Reset()
		p.Retires = append(p.Retires, 1)
		if _, err := e.Tick(&p); err != nil {
			b.Fatal(err)
		}
		if err := e.Free(1); err != nil {
			b.Fatal(err)
		}
		return d, dec
	}
	if _, err := e.PlainPrefill(64); err != nil { // warm up
		b.Fatal(err)
	}
	var plain, tick, inDecode []float64
	b.ResetTimer()
	for range b.N {
		for r := range reps {
			inTurn(r, func() {
				plain = append(plain, plainPrefillRate(b, e, promptLen))
			}, func() {
				d, dec := tickPrefill()
				tick = append(tick, promptLen/d.Seconds())
				inDecode = append(inDecode, promptLen/dec.Seconds())
			})
		}
	}
	b.Logf("tok/s by round: plain %.1f, tick %.1f", plain, tick)
	b.ReportMetric(median(plain), "plain-tok/s")
	b.ReportMetric(median(tick), "tick-tok/s")
	b.ReportMetric(median(inDecode), "tick-llama-tok/s")
	b.ReportMetric(median(ratios(tick, plain)), "tick/plain")
}

// BenchmarkPrefillUBatch prefills a 2,000-token prompt in one plain
// llama_decode call at micro-batches from 64 (what `serve --batch 64` steps
// were) through 512 (llama-bench's and llama-server's default, and
// DefaultUBatch) to 2048, alternating them: the cost of small steps in the
// kernels themselves, with nothing of superfluid's around them. Reported:
// tokens/s of each and each one's ratio to 512's.
func BenchmarkPrefillUBatch(b *testing.B) {
	path := benchModel(b)
	const promptLen = 2000
	reps := benchReps(3)
	ubatches := []int{64, 128, 256, 512, 1024, 2048}
	engines := make([]*Engine, len(ubatches))
	for i, u := range ubatches {
		e, err := Open(Options{ModelPath: path, Ctx: 4096, Lanes: 1, Seqs: 1, Batch: 2048, UBatch: u, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA")})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		if _, err := e.PlainPrefill(64); err != nil { // warm up
			b.Fatal(err)
		}
		engines[i] = e
	}
	rates := make([][]float64, len(ubatches))
	b.ResetTimer()
	runs := make([]func(), len(engines))
	for i, e := range engines {
		runs[i] = func() { rates[i] = append(rates[i], plainPrefillRate(b, e, promptLen)) }
	}
	for range b.N {
		for r := range reps {
			inTurn(r, runs...)
		}
	}
	ref := slices.Index(ubatches, 512)
	for i, u := range ubatches {
		b.ReportMetric(median(rates[i]), fmt.Sprintf("ubatch%d-tok/s", u))
		if i != ref {
			b.ReportMetric(median(ratios(rates[i], rates[ref])), fmt.Sprintf("ubatch%d/512", u))
		}
	}
}

// BenchmarkDecodeUBatch decodes through sf_tick at 1 and 8 streams on two
// contexts over the same file, n_batch 64 with n_ubatch 64 (serve's old
// default) and n_batch 2048 with n_ubatch 512 (its default now),
// alternating them: what the bigger micro-batch's compute buffer costs a
// decode step, if anything. Reported: tokens/s of each and new/old paired
// per round.
func BenchmarkDecodeUBatch(b *testing.B) {
	path := benchModel(b)
	const promptLen, n = 8, 48 // eight prompts fit the old batch of 64
	reps := benchReps(5)
	open := func(batch, ubatch int) *Engine {
		e, err := Open(Options{ModelPath: path, Ctx: 4096, Lanes: 8, Seqs: 8, Batch: batch, UBatch: ubatch, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		return e
	}
	old, cur := open(64, 64), open(2048, 512)
	for _, lanes := range []int{1, 8} {
		var rOld, rCur []float64
		rate := func(e *Engine) float64 {
			spent, _ := tickDecode(b, e, lanes, promptLen, n)
			return float64(lanes*n) / spent.Seconds()
		}
		for range b.N {
			for r := range reps {
				inTurn(r, func() { rOld = append(rOld, rate(old)) }, func() { rCur = append(rCur, rate(cur)) })
			}
		}
		b.ReportMetric(median(rOld), fmt.Sprintf("b64u64-%dx-tok/s", lanes))
		b.ReportMetric(median(rCur), fmt.Sprintf("b2048u512-%dx-tok/s", lanes))
		b.ReportMetric(median(ratios(rCur, rOld)), fmt.Sprintf("new/old-%dx", lanes))
	}
}

// BenchmarkPrefillRepack measures what the CPU backend's weight repacking
// is worth (SF_BENCH_MODEL should be Q4_0: `make bench-engine` generates
// synth-0.5b-q4_0.gguf; Q8_0 and F16 are not repacked on x86): a
// 2,000-token prompt in one plain llama_decode, and decode at 8 streams
// (the plain llama_decode loop), on two engines over the same file —
// weights repacked, and in the file's layout (Options.NoRepack, llama-server's
// --no-repack) — alternating them. Reported: tokens/s of each and the
// repacked/plain ratios.
func BenchmarkPrefillRepack(b *testing.B) {
	path := benchModel(b)
	const promptLen, lanes, rounds = 2000, 8, 32
	reps := benchReps(3)
	modes := []struct {
		name     string
		noRepack bool
	}{{"repack", false}, {"norepack", true}}
	engines := make([]*Engine, len(modes))
	for i, m := range modes {
		e, err := Open(Options{ModelPath: path, Ctx: 4096, Lanes: lanes, Seqs: lanes, Batch: 2048, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA"), NoRepack: m.noRepack})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		if _, err := e.PlainPrefill(64); err != nil { // warm up
			b.Fatal(err)
		}
		engines[i] = e
	}
	if engines[0].RepackedBytes() == 0 {
		b.Logf("no weights repacked (model type or build): the two engines run the same kernels")
	}
	prefill := make([][]float64, len(modes))
	decode := make([][]float64, len(modes))
	b.ResetTimer()
	runs := make([]func(), len(engines))
	for i, e := range engines {
		runs[i] = func() {
			prefill[i] = append(prefill[i], plainPrefillRate(b, e, promptLen))
			decode[i] = append(decode[i], plainDecodeRate(b, e, lanes, 32, rounds))
		}
	}
	for range b.N {
		for r := range reps {
			inTurn(r, runs...)
		}
	}
	for i, m := range modes {
		b.ReportMetric(median(prefill[i]), "prefill-"+m.name+"-tok/s")
		b.ReportMetric(median(decode[i]), fmt.Sprintf("decode%d-%s-tok/s", lanes, m.name))
	}
	b.ReportMetric(median(ratios(prefill[0], prefill[1])), "prefill-repack/norepack")
	b.ReportMetric(median(ratios(decode[0], decode[1])), "decode-repack/norepack")
}

// BenchmarkThreadPool decodes (the plain llama_decode loop) on engines
// that differ only in the CPU threads they compute on: the shared pool at
// DefaultPoll, one whose threads sleep at once (PollOff), and ggml's
// threads started for every step (PollNone, what llama-server does),
// alternating them. Reported: tokens/s of each and the ratios to PollNone.
// SF_BENCH_LANES sets the streams (default 1).
func BenchmarkThreadPool(b *testing.B) {
	path := benchModel(b)
	lanes := 1
	if n, err := strconv.Atoi(os.Getenv("SF_BENCH_LANES")); err == nil && n > 0 {
		lanes = n
	}
	const promptLen, n = 32, 64
	reps := benchReps(6)
	modes := []struct {
		name string
		poll int
	}{{"poll50", DefaultPoll}, {"sleep", PollOff}, {"perstep", PollNone}}
	rates := make([][]float64, len(modes))
	runs := make([]func(), len(modes))
	for i, m := range modes {
		e, err := Open(Options{ModelPath: path, Ctx: 2048, Lanes: lanes, Seqs: lanes, Batch: 512, Threads: runtime.NumCPU(), FlashAttn: os.Getenv("SF_FA"), Poll: m.poll})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		runs[i] = func() { rates[i] = append(rates[i], plainDecodeRate(b, e, lanes, promptLen, n)) }
		runs[i]() // warm up
		rates[i] = rates[i][:0]
	}
	b.ResetTimer()
	for range b.N {
		for r := range reps {
			inTurn(r, runs...)
		}
	}
	last := len(modes) - 1
	for i, m := range modes {
		b.ReportMetric(median(rates[i]), m.name+"-tok/s")
		if i < last {
			b.ReportMetric(median(ratios(rates[i], rates[last])), m.name+"/perstep")
		}
	}
}
