package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/sched"
	"superfluid/synth"
)

// BenchmarkSpeculation measures n-gram speculation through the scheduler
// on the real engine (SF_BENCH_MODEL, else the 0.5B-shaped synthetic
// model), two threads (SF_BENCH_THREADS), 1 and 4 streams: aggregate decode tokens/s without
// drafts, with gated drafts (the default when --spec-type ngram-simple),
// and with every draft the drafter finds (ungated), the three taken in
// turn each round. Three workloads: random prose, where a random-weight
// model never agrees with a draft — the gate must keep the loss small —
// a prompt repeating one passage, where the drafter finds drafts
// everywhere in the prompt, and a repeated sentence with the output held
// to its words by a grammar, where drafts are found and some land (on a
// hybrid model each rejected one is rolled back out of its recurrent
// state); and synthetic acceptance at a mean length of 3
// tokens a step (drafts of 4), the machinery's speed when drafts land
// (its output is not the model's). Reported: the rates, the paired ratios
// to no drafts, the drafts and acceptance of each.
//
//	SF_BENCH_REPS=3 go test -run '^$' -bench BenchmarkSpeculation ./e2e/
func BenchmarkSpeculation(b *testing.B) {
	path := benchModel(b)
	synth3, err := sched.SynthRates(nil, 3, 4)
	if err != nil {
		b.Fatal(err)
	}
	configs := []sched.Speculation{
		{},
		{Type: sched.SpecNgramSimple},
		{Type: sched.SpecNgramSimple, Ungated: true},
		{Type: sched.SpecNgramSimple, DraftMax: 4, SynthRates: synth3},
	}
	names := []string{"plain", "gated", "ungated", "synth-len3"}
	for _, workload := range []string{"prose", "repeat", "words"} {
		for _, streams := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/streams=%d", workload, streams), func(b *testing.B) {
				stacks := make([]*schedStack, len(configs))
				for i, c := range configs {
					stacks[i] = newSchedStack(b, stackConfig{model: path, lanes: streams, seqs: 2 * streams, threads: specBenchThreads(), sched: sched.Config{Speculation: c}})
				}
				prompts := make([][]engine.Token, streams)
				var grammar *engine.GrammarSpec
				for i := range prompts {
					prompts[i] = textTokens(b, stacks[0].eng.Engine, 200, uint64(2000+i))
					switch workload {
					case "repeat":
						unit := prompts[i][:50]
						prompts[i] = slices.Concat(unit, unit, unit, unit)
					case "words":
						// A random-weight model's output repeats nothing of its
						// own; a grammar of a few words makes it a walk over
						// them, which the n-gram drafter does draft from (and
						// the model accepts now and then).
						words := strings.Repeat("the cat sat on the mat and the dog sat on the log. ", 8)
						toks, err := stacks[0].eng.Engine.Tokenize(words, false, false)
						if err != nil {
							b.Fatal(err)
						}
						prompts[i] = toks
						grammar = &engine.GrammarSpec{GBNF: `root ::= ("cat" | " sat" | " the" | " mat" | " on" | ".")+`}
					}
				}
				specPairedRounds(b, stacks, names, prompts, grammar)
			})
		}
	}
}

// BenchmarkSpeculationDraftModel measures drafts from a draft model
// (draft-simple) through the scheduler on the real engine: the target
// SF_BENCH_MODEL (else the 0.5B-shaped synthetic model, q8_0), the draft
// SF_BENCH_DRAFT_MODEL (else the tiny-shaped one over the same 151,936-token
// vocabulary, other random weights: its drafts never land), 1 and 4
// streams of random prose, aggregate decode tokens/s of: no drafts; the
// draft model's drafts behind the gate (the default) and ungated; and
// synthetic acceptance at mean lengths 3 (drafts of 4) and 5 (drafts of
// 6), where the draft model still drafts every step but its drafts are
// committed at the set rate (the machinery's speed when drafts land; the
// output is not the model's). Taken in turn each round, reversed every
// other; reported: the rates and the paired ratios to no drafts.
//
//	make bench-spec
func BenchmarkSpeculationDraftModel(b *testing.B) {
	path := benchModel(b)
	draft := benchDraftModel(b)
	synth3, err := sched.SynthRates(nil, 3, 4)
	if err != nil {
		b.Fatal(err)
	}
	synth5, err := sched.SynthRates(nil, 5, 6)
	if err != nil {
		b.Fatal(err)
	}
	configs := []sched.Speculation{
		{},
		{Type: sched.SpecDraftSimple},
		{Type: sched.SpecDraftSimple, Ungated: true},
		{Type: sched.SpecDraftSimple, DraftMax: 4, SynthRates: synth3},
		{Type: sched.SpecDraftSimple, DraftMax: 6, SynthRates: synth5},
	}
	names := []string{"plain", "draft-gated", "draft-ungated", "synth-len3", "synth-len5"}
	for _, streams := range []int{1, 4} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			stacks := make([]*schedStack, len(configs))
			for i, c := range configs {
				sc := stackConfig{model: path, lanes: streams, seqs: 2 * streams, threads: specBenchThreads(), sched: sched.Config{Speculation: c}}
				if c.Type == sched.SpecDraftSimple {
					sc.draftModel = draft
				}
				stacks[i] = newSchedStack(b, sc)
			}
			prompts := make([][]engine.Token, streams)
			for i := range prompts {
				prompts[i] = textTokens(b, stacks[0].eng.Engine, 200, uint64(3000+i))
			}
			specPairedRounds(b, stacks, names, prompts, nil)
		})
	}
}

// specPairedRounds measures each stack's decode rate over prompts, the
// stacks in turn each round (specInTurn), and reports each one's median
// rate and, beside the first (plain decoding), the median of its per-round
// ratios to it.
func specPairedRounds(b *testing.B, stacks []*schedStack, names []string, prompts [][]engine.Token, grammar *engine.GrammarSpec) {
	rates := make([][]float64, len(stacks))
	reps := specBenchReps(3)
	b.ResetTimer()
	for range b.N {
		for r := range reps {
			runs := make([]func(), len(stacks))
			for i := range stacks {
				runs[i] = func() { rates[i] = append(rates[i], specDecodeRate(b, stacks[i], prompts, 64, grammar)) }
			}
			specInTurn(r, runs...)
		}
	}
	for i, name := range names {
		b.ReportMetric(specMedian(rates[i]), name+"-tok/s")
		if i > 0 {
			ratio := make([]float64, len(rates[i]))
			for j := range ratio {
				ratio[j] = rates[i][j] / rates[0][j]
			}
			b.ReportMetric(specMedian(ratio), name+"/plain")
			b.Logf("%s/plain by round %.3f", name, ratio)
		}
		st := stacks[i].s.Stats()
		b.Logf("%s: tok/s by round %.2f; drafts %d, accepted %d, gate closed %d", name, rates[i], st.DraftTokens, st.DraftAccepted, st.DraftGateClosed)
	}
}

// benchDraftModel is SF_BENCH_DRAFT_MODEL, else the tiny-shaped synthetic
// model over the 0.5B shape's vocabulary (written on first use).
func benchDraftModel(b *testing.B) string {
	if p := os.Getenv("SF_BENCH_DRAFT_MODEL"); p != "" {
		return p
	}
	p := filepath.Join("..", ".cache", "models", "synth-tiny-v151936-f16.gguf")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		b.Fatal(err)
	}
	big, err := synth.ShapeByName("0.5b")
	if err != nil {
		b.Fatal(err)
	}
	shape.Vocab = big.Vocab
	if err := synth.Write(p, synth.Options{Shape: shape, Type: "f16", Seed: 2}); err != nil {
		b.Fatal(err)
	}
	return p
}

// specDecodeRate runs the prompts as concurrent Chat requests of maxTokens
// each on st and returns the aggregate tokens/s from the last stream's
// first token to the last end (as schedDecodeRate counts).
func specDecodeRate(b *testing.B, st *schedStack, prompts [][]engine.Token, maxTokens int, grammar *engine.GrammarSpec) float64 {
	times := make([][]time.Time, len(prompts))
	var wg sync.WaitGroup
	for i, prompt := range prompts {
		s, err := st.s.Submit(context.Background(), sched.Request{Prompt: prompt, Class: sched.Chat, MaxTokens: maxTokens, Grammar: grammar})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for {
				if _, err := s.Next(context.Background()); err == io.EOF {
					break
				} else if err != nil {
					b.Error(err)
					return
				}
				times[i] = append(times[i], time.Now())
			}
		})
	}
	wg.Wait()
	var start, end time.Time
	for _, ts := range times {
		start = later(start, ts[0])
		end = later(end, ts[len(ts)-1])
	}
	tokens := 0
	for _, ts := range times {
		for _, t := range ts {
			if t.After(start) {
				tokens++
			}
		}
	}
	return float64(tokens) / end.Sub(start).Seconds()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// specBenchThreads is SF_BENCH_THREADS when set (1 on a machine others
// load: two threads spin-waiting for each other on two shared cores
// measure the neighbours), else benchThreads.
func specBenchThreads() int {
	if n, err := strconv.Atoi(os.Getenv("SF_BENCH_THREADS")); err == nil && n > 0 {
		return n
	}
	return benchThreads
}

// specBenchReps is SF_BENCH_REPS when set, else def.
func specBenchReps(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SF_BENCH_REPS")); err == nil && n > 0 {
		return n
	}
	return def
}

// specInTurn runs one round's measurements in order, reversed every
// other round, so the machine's drift falls on each alike.
func specInTurn(round int, runs ...func()) {
	for i := range runs {
		if round%2 == 1 {
			i = len(runs) - 1 - i
		}
		runs[i]()
	}
}

func specMedian(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
