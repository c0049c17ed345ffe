package cgo

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"superfluid/engine"
)

// specStepTime is the mean wall time of n decode steps of lanes lanes,
// each carrying a draft of k tokens (tokens the model is not expected to
// agree with, so the context grows by about one a step as a plain decode's
// does), after a promptLen-token prompt; the lanes are retired after.
func specStepTime(b *testing.B, e *Engine, lanes, k, promptLen, n int) time.Duration {
	var p engine.Plan
	vocab := e.Descriptor().Vocab
	for i := range lanes {
		prompt := make([]engine.Token, promptLen)
		for j := range prompt {
			prompt[j] = engine.Token((1 + i*31 + j*7) % vocab)
		}
		e.Free(int32(i))
		p.AddAdmit(engine.Admit{Lane: uint32(i), Seq: int32(i), MaxTokens: uint32(n*(k+1) + 1), Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: uint32(i), Count: uint32(promptLen)})
	}
	if _, err := e.Tick(&p); err != nil {
		b.Fatal(err)
	}
	draft := make([]engine.Token, k)
	var spent time.Duration
	for s := range n {
		p.Reset()
		for i := range lanes {
			for j := range draft {
				draft[j] = engine.Token((7 + s*13 + j*101 + i) % vocab)
			}
			p.AddDraft(uint32(i), draft)
		}
		start := time.Now()
		if _, err := e.Tick(&p); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
	}
	p.Reset()
	for i := range lanes {
		p.Retires = append(p.Retires, uint32(i))
	}
	if _, err := e.Tick(&p); err != nil {
		b.Fatal(err)
	}
	return spent / time.Duration(n)
}

// breakEvenAcceptance is the per-token acceptance α at which a draft of k
// tokens commits, on average, gain times as many tokens per second as a
// plain step, given a drafted step costs cost times a plain one: the
// expected tokens of a drafted step, (1-α^(k+1))/(1-α), equal gain·cost.
// 1 when no acceptance pays.
func breakEvenAcceptance(k int, cost, gain float64) float64 {
	want := gain * cost
	if float64(k+1) <= want {
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		a := (lo + hi) / 2
		tokens := float64(k + 1)
		if a < 1 {
			tokens = (1 - math.Pow(a, float64(k+1))) / (1 - a)
		}
		if tokens < want {
			lo = a
		} else {
			hi = a
		}
	}
	return hi
}

// BenchmarkSpecStepCost measures what verifying a draft costs on this
// machine: the time of a decode step whose lanes each carry k draft rows
// (k+1 rows a lane) against a plain step's (k = 0), at 1 and 4 lanes, the
// k's of a round taken in turn (reversed every other round) so the
// machine's drift falls on each alike. Reported per k: the step time, its
// ratio to the plain step's (paired per round, median), and the break-even
// per-token acceptance: what a lane's drafts must reach for the step's
// tokens per second to match plain decoding's (be) and to pass the gate's
// 1.08 (be-gate).
func BenchmarkSpecStepCost(b *testing.B) {
	path := benchModel(b)
	// SF_BENCH_THREADS=1 on a machine others load: two threads that
	// spin-wait for each other on two shared cores measure the
	// neighbours, not the rows (steps of 1.4 s where 30 ms is usual).
	threads := runtime.NumCPU()
	if n, err := strconv.Atoi(os.Getenv("SF_BENCH_THREADS")); err == nil && n > 0 {
		threads = n
	}
	ks := []int{0, 1, 2, 4, 8}
	for _, lanes := range []int{1, 4} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			// A recurrent or hybrid model keeps a rollback snapshot per draft row.
			e, err := Open(Options{ModelPath: path, Ctx: 2048, Lanes: lanes, Seqs: lanes, Batch: 512, Threads: threads, FlashAttn: os.Getenv("SF_FA"), DraftMax: ks[len(ks)-1]})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			const promptLen, n = 64, 12
			reps := benchReps(5)
			secs := make([][]float64, len(ks))
			specStepTime(b, e, lanes, 2, promptLen, 4) // warm up
			b.ResetTimer()
			for range b.N {
				for r := range reps {
					runs := make([]func(), len(ks))
					for i, k := range ks {
						runs[i] = func() { secs[i] = append(secs[i], specStepTime(b, e, lanes, k, promptLen, n).Seconds()) }
					}
					inTurn(r, runs...)
				}
			}
			for i, k := range ks {
				cost := median(ratios(secs[i], secs[0]))
				b.Logf("k=%d: %.2f ms/step, %.3fx the plain step; break-even acceptance %.2f (gate 1.08: %.2f)",
					k, 1e3*median(secs[i]), cost, breakEvenAcceptance(k, cost, 1), breakEvenAcceptance(k, cost, 1.08))
				b.ReportMetric(1e3*median(secs[i]), fmt.Sprintf("k%d-ms/step", k))
				if k > 0 {
					b.ReportMetric(cost, fmt.Sprintf("k%d-cost", k))
					b.ReportMetric(breakEvenAcceptance(k, cost, 1.08), fmt.Sprintf("k%d-be-gate", k))
				}
			}
		})
	}
}

func TestBreakEvenAcceptance(t *testing.T) {
	cases := []struct {
		k          int
		cost, gain float64
		want       float64
	}{
		{1, 1, 1, 0},          // free rows pay at any acceptance
		{1, 1.5, 1, 0.5},      // 1 + α = 1.5
		{1, 2, 1, 1},          // two rows for at most two tokens
		{4, 6, 1, 1},          // more than k+1 times the cost never pays
		{2, 1.75, 1, 0.5},     // 1 + α + α² = 1.75
		{1, 1.25, 1.08, 0.35}, // 1 + α = 1.35
	}
	for _, c := range cases {
		if got := breakEvenAcceptance(c.k, c.cost, c.gain); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("breakEvenAcceptance(%d, %v, %v) = %v, want %v", c.k, c.cost, c.gain, got, c.want)
		}
	}
}

// draftCallTime is the mean wall time of n calls of d drafting k tokens
// for each of lanes lanes whose histories (promptLen tokens to begin with,
// caught up first) grow by one token a call, as plain decoding's do.
func draftCallTime(b *testing.B, d *Drafter, vocab, lanes, k, promptLen, n int) time.Duration {
	hist := make([][]engine.Token, lanes)
	for i := range hist {
		for j := range promptLen {
			hist[i] = append(hist[i], engine.Token((3+i*37+j*11)%vocab))
		}
	}
	reqs := make([]engine.DraftRequest, lanes)
	call := func() time.Duration {
		for i := range reqs {
			reqs[i] = engine.DraftRequest{Lane: uint32(i), History: hist[i], Max: k}
		}
		took, err := d.Draft(reqs)
		if err != nil {
			b.Fatal(err)
		}
		return took
	}
	for range (promptLen+511)/512 + 1 {
		call() // catch up
	}
	var spent time.Duration
	for s := range n {
		for i := range hist {
			hist[i] = append(hist[i], engine.Token((5+s*17+i)%vocab))
		}
		spent += call()
	}
	return spent / time.Duration(n)
}

// BenchmarkDraftModelCost measures a draft model's part of a drafted
// step: one drafter call for every lane (k draft positions, the lanes'
// new tokens caught up) against the target's plain decode step, at 1 and 4
// lanes (SF_BENCH_MODEL, SF_BENCH_DRAFT_MODEL: the 0.5b target and a tiny
// draft over its vocabulary, as make bench-spec sets them), each k's
// drafter call and the plain step taken in turn. Reported per k: the call's
// time and its ratio to the plain step; the drafted step costs that much
// on top of verifying its rows (BenchmarkSpecStepCost).
func BenchmarkDraftModelCost(b *testing.B) {
	path, draft := benchModel(b), os.Getenv("SF_BENCH_DRAFT_MODEL")
	if draft == "" {
		b.Skip("SF_BENCH_DRAFT_MODEL names no draft model")
	}
	threads := runtime.NumCPU()
	if n, err := strconv.Atoi(os.Getenv("SF_BENCH_THREADS")); err == nil && n > 0 {
		threads = n
	}
	ks := []int{1, 2, 4}
	for _, lanes := range []int{1, 4} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			e, err := Open(Options{ModelPath: path, Ctx: 2048, Lanes: lanes, Seqs: lanes, Batch: 512, Threads: threads})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			de, err := Open(Options{ModelPath: draft, Ctx: 2048, Lanes: lanes, Seqs: lanes, Batch: 512, Threads: threads})
			if err != nil {
				b.Fatal(err)
			}
			defer de.Close()
			d, err := NewDrafter(de, e, 0)
			if err != nil {
				b.Fatal(err)
			}
			const promptLen, n = 64, 12
			reps := benchReps(5)
			plain := []float64{}
			calls := make([][]float64, len(ks))
			b.ResetTimer()
			for range b.N {
				for r := range reps {
					runs := []func(){func() { plain = append(plain, specStepTime(b, e, lanes, 0, promptLen, n).Seconds()) }}
					for i, k := range ks {
						runs = append(runs, func() {
							calls[i] = append(calls[i], draftCallTime(b, d, e.Descriptor().Vocab, lanes, k, promptLen, n).Seconds())
						})
					}
					inTurn(r, runs...)
				}
			}
			b.Logf("plain step: %.2f ms", 1e3*median(plain))
			for i, k := range ks {
				share := median(ratios(calls[i], plain))
				b.Logf("k=%d: a drafter call %.2f ms, %.3fx the plain step", k, 1e3*median(calls[i]), share)
				b.ReportMetric(1e3*median(calls[i]), fmt.Sprintf("k%d-draft-ms", k))
				b.ReportMetric(share, fmt.Sprintf("k%d-draft/plain", k))
			}
		})
	}
}
