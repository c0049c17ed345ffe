package e2e

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"superfluid/cgo"
	"superfluid/engine"
	"superfluid/park"
)

// BenchmarkPark measures the disk tier on the 0.5B-shaped synthetic model:
// for 2,000- and 8,000-token streams, the time to restore a parked stream
// (read, verify, decompress, import into the engine) against the time to
// prefill it again, the file bytes per token for f16 and q8_0 KV caches
// (lossless, and lossy for f16), and the writer's throughput.
//
//	go test -run '^$' -bench BenchmarkPark ./e2e/
//
// The prefills that produce the states dominate the run. It stays bounded
// (under three minutes): the q8_0 cache is measured on 512 tokens (bytes
// per token do not depend on the length), and the 8,000-token f16 stream
// is prefilled only when the 2,000-token rate says it fits the time left
// (SF_PARK_BENCH_SECONDS, default 170); otherwise the skip is reported.
func BenchmarkPark(b *testing.B) {
	path := benchModel(b)
	budget := 170 * time.Second
	if v, err := time.ParseDuration(os.Getenv("SF_PARK_BENCH_SECONDS") + "s"); err == nil && v > 0 {
		budget = v
	}
	deadline := time.Now().Add(budget)

	f16 := openParkBench(b, path, "f16", 8000)
	defer f16.e.Close()
	st2k := f16.to(b, 2000)
	q8 := openParkBench(b, path, "q8_0", 512)
	defer q8.e.Close()
	stQ8 := q8.to(b, 512)
	q8.retire(b)

	// Restores go to sequence 1 while the f16 lane keeps sequence 0 for
	// the 8,000-token prefill.
	runParkStates(b, f16.e, st2k)
	runParkStates(b, q8.e, stQ8)
	b.Run("writer", func(b *testing.B) { benchParkWriter(b, st2k.blob) })

	// The 8,000-token stream, if its prefill fits: attention makes later
	// tokens dearer, hence the margin on the 2,000-token rate.
	need := time.Duration(float64(st2k.prefill) / 2000 * 6000 * 1.5)
	if reserve := 10 * time.Second; time.Now().Add(need + reserve).After(deadline) {
		fmt.Fprintf(os.Stderr, "BenchmarkPark: skipping the 8000-token stream: its prefill would take about %v more, past the %v bound (SF_PARK_BENCH_SECONDS)\n",
			need.Round(time.Second), budget)
		return
	}
	st8k := f16.to(b, 8000)
	f16.retire(b)
	runParkStates(b, f16.e, st8k)
}

func runParkStates(b *testing.B, e *cgo.Engine, st parkState) {
	for _, lossy := range []bool{false, true} {
		if lossy && st.desc.CacheTypeK != "f16" {
			continue
		}
		b.Run(fmt.Sprintf("kv=%s/tokens=%d/lossy=%v", st.desc.CacheTypeK, st.n, lossy), func(b *testing.B) {
			benchParkRestore(b, e, st, lossy)
		})
	}
}

// parkState is a sequence's exported state after prefilling n tokens, and
// how long that prefill took.
type parkState struct {
	n       int
	blob    []byte
	prefill time.Duration
	desc    *engine.Descriptor
	tokens  []engine.Token
}

// parkPrefiller prefills one prompt on sequence 0 of an engine, in
// batch-sized chunks, exporting the state at the lengths asked for.
type parkPrefiller struct {
	e      *cgo.Engine
	p      engine.Plan
	prompt []engine.Token
	filled int
	spent  time.Duration
}

func openParkBench(b *testing.B, path, kvt string, most int) *parkPrefiller {
	opts := cgo.Options{ModelPath: path, Ctx: most + 2560, Lanes: 1, Seqs: 2, Batch: 512, Threads: runtime.NumCPU(), CacheTypeK: kvt, CacheTypeV: kvt}
	e, err := cgo.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	pf := &parkPrefiller{e: e, prompt: make([]engine.Token, most+1)}
	vocab := e.Descriptor().Vocab
	for i := range pf.prompt {
		pf.prompt[i] = engine.Token(300 + (i*7919)%(min(vocab, 20300)-300))
	}
	pf.p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 1, Sampling: engine.Greedy()}, pf.prompt, nil)
	return pf
}

// to prefills up to n tokens and exports the sequence; the prefill time
// reported is all the chunks so far.
func (pf *parkPrefiller) to(b *testing.B, n int) parkState {
	for pf.filled < n {
		c := min(512, n-pf.filled)
		pf.p.Prefills = append(pf.p.Prefills[:0], engine.Prefill{Lane: 1, Offset: uint32(pf.filled), Count: uint32(c)})
		start := time.Now()
		if _, err := pf.e.Tick(&pf.p); err != nil {
			b.Fatal(err)
		}
		pf.spent += time.Since(start)
		pf.p.Admits, pf.p.Tokens = pf.p.Admits[:0], pf.p.Tokens[:0]
		pf.filled += c
	}
	blob, err := pf.e.Export(0, nil)
	if err != nil {
		b.Fatal(err)
	}
	d := pf.e.Descriptor()
	fmt.Fprintf(os.Stderr, "BenchmarkPark: kv=%s: prefilled %d tokens in %v (%.0f tok/s)\n", d.CacheTypeK, n, pf.spent.Round(time.Millisecond), float64(n)/pf.spent.Seconds())
	return parkState{n: n, blob: blob, prefill: pf.spent, desc: d, tokens: pf.prompt[:n]}
}

// retire takes the prefilling lane out of the engine.
func (pf *parkPrefiller) retire(b *testing.B) {
	pf.p.Reset()
	pf.p.Retires = append(pf.p.Retires, 1)
	if _, err := pf.e.Tick(&pf.p); err != nil {
		b.Fatal(err)
	}
	pf.e.Free(0)
}

// benchParkRestore parks st once (timing the write: compress, write, fsync,
// rename), then restores it per iteration: Load (read, verify, decompress)
// and Import into sequence 1.
func benchParkRestore(b *testing.B, e *cgo.Engine, st parkState, lossy bool) {
	cfg := park.Config{Dir: b.TempDir(), Identity: st.desc.Identity, KVType: st.desc.CacheTypeK, VType: st.desc.CacheTypeV, VLayout: park.VRows, Lossy: lossy}
	s, err := park.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	s.Put(st.tokens, st.blob, nil)
	s.Close() // waits for the write
	write := time.Since(start)
	if s.Stats().Parks.Load() != 1 {
		b.Fatalf("park write failed (%d errors)", s.Stats().WriteErrors.Load())
	}
	fileBytes := s.Stats().BytesFile.Load()
	if s, err = park.Open(cfg); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var loads, imports []time.Duration
	var buf []byte
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		raw, err := s.Load(st.tokens, buf)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		n, err := e.Import(1, raw)
		if err != nil || n != st.n {
			b.Fatalf("import: %d tokens, %v", n, err)
		}
		loads, imports = append(loads, t1.Sub(t0)), append(imports, time.Since(t1))
		buf = raw
		b.StopTimer()
		e.Free(1)
		b.StartTimer()
	}
	b.StopTimer()
	load, imp := parkMedian(loads), parkMedian(imports)
	restore := load + imp
	b.ReportMetric(parkMS(restore), "restore-ms")
	b.ReportMetric(parkMS(load), "load-ms")
	b.ReportMetric(parkMS(imp), "import-ms")
	b.ReportMetric(parkMS(st.prefill), "prefill-ms")
	b.ReportMetric(restore.Seconds()/st.prefill.Seconds(), "restore/prefill")
	b.ReportMetric(float64(len(st.blob))/float64(st.n), "state-B/tok")
	b.ReportMetric(float64(fileBytes)/float64(st.n), "file-B/tok")
	b.ReportMetric(float64(fileBytes)/float64(len(st.blob)), "ratio")
	b.ReportMetric(parkMS(write), "write-ms")
}

// benchParkWriter queues eight 2,000-token f16 states at once and times the
// writer through all of them (compress, write, fsync, rename each).
func benchParkWriter(b *testing.B, blob []byte) {
	const files = 8
	var total time.Duration
	for range b.N {
		s, err := park.Open(park.Config{Dir: b.TempDir(), Identity: "writer benchmark", KVType: "f16", VLayout: park.VRows})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := range files {
			s.Put([]engine.Token{engine.Token(i), 1, 2, 3}, blob, nil)
		}
		s.Close()
		total += time.Since(start)
		if s.Stats().Parks.Load() != files {
			b.Fatalf("wrote %d of %d", s.Stats().Parks.Load(), files)
		}
	}
	per := total / time.Duration(b.N)
	b.ReportMetric(float64(files*len(blob))/per.Seconds()/1e6, "state-MB/s")
	b.ReportMetric(files/per.Seconds(), "files/s")
}

func parkMedian(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func parkMS(d time.Duration) float64 { return float64(d) / 1e6 }
