package e2e

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"superfluid/app"
	"superfluid/engine"
	"superfluid/sched"
	"superfluid/synth"
)

// draftModelFile writes (once) a tiny model with weights from seed and
// the built-in vocabulary padded to vocab tokens (0: the tiny shape's).
func draftModelFile(t testing.TB, seed uint64, vocab int) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := fmt.Sprintf("draft|%d|%d", seed, vocab)
	if p, ok := modelMemo[key]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if vocab > 0 {
		s.Vocab = vocab
	}
	path := filepath.Join(modelDir, fmt.Sprintf("draft-%d-%d.gguf", seed, vocab))
	if err := synth.Write(path, synth.Options{Shape: s, Type: "f16", Seed: seed}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// Through the real server, four lanes at once: greedy completions with a
// draft model's drafts are those without (up to the near-ties rounding
// flips, as TestSpeculationGivesThePlainCompletions explains), with a
// draft model that agrees with the target (its own weights: most drafts
// land) and one that does not (other weights: hardly any do), and the
// drafts are counted per request and on /metrics. A grammar lane's
// drafts seldom land: the draft model knows no grammar.
func TestDraftModelGivesThePlainCompletions(t *testing.T) {
	plainStack := startStack(t, app.Options{Lanes: 4})
	text := strings.Repeat("the cat sat on the mat and the dog sat on the log. ", 3)
	bodies := []string{
		jsonBody(map[string]any{"prompt": text, "n_predict": 40, "temperature": 0, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": "Notes: " + text, "n_predict": 32, "temperature": 0, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": "A story. " + text, "n_predict": 40, "temperature": 0, "stop": []string{"dog"}, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": text, "n_predict": 32, "temperature": 0, "grammar": `root ::= ("cat" | " sat" | " the" | " mat" | ".")+`, "n_probs": 2}),
	}
	run := func(st *app.Stack) []specCompletion {
		out := make([]specCompletion, len(bodies))
		var wg sync.WaitGroup
		for i, b := range bodies {
			wg.Go(func() { out[i] = llamaDo[specCompletion](t, st, "/completion", b) })
		}
		wg.Wait()
		return out
	}
	plain := run(plainStack)
	for _, c := range []struct {
		name     string
		draft    string
		minShare float64
		maxShare float64
	}{
		{"own weights", tinyModel(t), 0.9, 1},
		{"other weights", draftModelFile(t, 3, 0), 0, 0.2},
	} {
		st := startStack(t, app.Options{Lanes: 4, Sched: sched.Config{Speculation: sched.Speculation{
			Type: sched.SpecDraftSimple, DraftModel: c.draft, DraftMax: 4, Ungated: true}}})
		got := run(st)
		drafted, accepted, freeDrafted, freeAccepted := 0, 0, 0, 0
		for i := range bodies {
			if j, ok := sameUpToATie(got[i], plain[i]); !ok {
				t.Fatalf("%s: request %d differs at token %d, not at a near-tie:\nwith drafts %q\nwithout %q", c.name, i, j, got[i].Content, plain[i].Content)
			} else if j >= 0 {
				t.Logf("%s: request %d: the runs part at token %d, a near-tie", c.name, i, j)
			}
			if d := got[i].Timings; d.DraftN != nil && d.DraftNAccepted != nil {
				drafted += *d.DraftN
				accepted += *d.DraftNAccepted
				if i != 3 { // the grammar's: the draft model knows no grammar
					freeDrafted += *d.DraftN
					freeAccepted += *d.DraftNAccepted
				}
			}
		}
		share := float64(freeAccepted) / float64(max(freeDrafted, 1))
		t.Logf("%s: %d of %d draft tokens accepted, %d of %d without a grammar", c.name, accepted, drafted, freeAccepted, freeDrafted)
		// /metrics counts them under the configured source's label.
		if freeDrafted == 0 || share < c.minShare || share > c.maxShare ||
			specMetric(t, st, "superfluid_draft_tokens_total{source=\"draft-simple\"}") != drafted ||
			specMetric(t, st, "superfluid_draft_accepted_tokens_total{source=\"draft-simple\"}") != accepted {
			t.Fatalf("%s: %d of %d draft tokens accepted (want a share in [%v, %v]), or /metrics disagrees", c.name, freeAccepted, freeDrafted, c.minShare, c.maxShare)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A draft model whose vocabulary is not the model's is refused at start,
// by its flag; so is one that cannot take drafts' cuts.
func TestDraftModelOfAnotherVocabularyIsRefused(t *testing.T) {
	other := draftModelFile(t, 3, synth.BuiltinVocabSize()+1000)
	_, err := app.Start("127.0.0.1:0", app.Options{ModelPath: tinyModel(t), Lanes: 2, Threads: 1, Ctx: 1024,
		Sched: sched.Config{Speculation: sched.Speculation{Type: sched.SpecDraftSimple, DraftModel: other}}})
	if err == nil || !strings.Contains(err.Error(), "--spec-draft-model") || !strings.Contains(err.Error(), "tokens, the model has") {
		t.Fatalf("a draft vocabulary 1000 tokens larger: %v", err)
	}
}

// As llama-server's, the draft model serves the default model: a
// --fim-model of another vocabulary loads beside it and runs without
// drafts.
func TestDraftModelServesTheDefaultModelOnly(t *testing.T) {
	other := draftModelFile(t, 3, synth.BuiltinVocabSize()+1000)
	st := startStack(t, app.Options{Lanes: 2, FIMModelPath: other,
		Sched: sched.Config{Speculation: sched.Speculation{Type: sched.SpecDraftSimple, DraftModel: tinyModel(t), Ungated: true}}})
	got := llamaDo[specCompletion](t, st, "/completion", jsonBody(map[string]any{"prompt": "the cat sat on the mat", "n_predict": 16, "temperature": 0}))
	if got.Timings.DraftN == nil || *got.Timings.DraftN == 0 {
		t.Fatal("the default model drafted nothing")
	}
}

// Sampled decoding with a draft model's drafts keeps the target's
// distribution: a short continuation sampled under many seeds, with and
// without drafts, falls into the same outcomes alike (a two-sample
// chi-square test at p = 0.001; the seeds are fixed, so the test is
// deterministic). The draft model is the target's own weights, so its
// greedy drafts are the target's likeliest tokens and land often — what a
// verifier that favoured the draft would over-sample. To show the test
// can tell, drafts committed whatever the target says (synthetic
// acceptance, benchmarking's) must fail it.
func TestDraftModelKeepsTheTargetDistribution(t *testing.T) {
	const draws = 400
	path := tinyModel(t)
	sampling := engine.Sampling{Temperature: 1, TopK: 3, TopP: 1, RepeatPenalty: 1, PenaltyLastN: 64}
	collect := func(st *schedStack, prompt []engine.Token) (map[string]int, int, int) {
		outcomes := map[string]int{}
		streams := make([]*sched.Stream, draws)
		for i := range streams {
			s := sampling
			s.Seed = uint64(1000 + i)
			var err error
			if streams[i], err = st.s.Submit(context.Background(), sched.Request{Prompt: prompt, Class: sched.Chat, MaxTokens: 3, Sampling: s}); err != nil {
				t.Fatal(err)
			}
		}
		drafted, accepted := 0, 0
		for _, s := range streams {
			toks, res := collectStream(t, s)
			outcomes[fmt.Sprint(toks)]++
			drafted += res.DraftTokens
			accepted += res.DraftAccepted
		}
		return outcomes, drafted, accepted
	}
	plainStack := newSchedStack(t, stackConfig{model: path, lanes: 4})
	prompt := textTokens(t, plainStack.eng.Engine, 24, 77)
	plain, _, _ := collect(plainStack, prompt)
	synthRates, err := sched.SynthRates([]float64{1, 1}, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		spec sched.Speculation
		same bool
	}{
		{"verified drafts", sched.Speculation{Type: sched.SpecDraftSimple, DraftMax: 2, Ungated: true}, true},
		{"drafts taken unverified", sched.Speculation{Type: sched.SpecDraftSimple, DraftMax: 2, SynthRates: synthRates}, false},
	} {
		st := newSchedStack(t, stackConfig{model: path, lanes: 4, draftModel: path, sched: sched.Config{Speculation: c.spec}})
		got, drafted, accepted := collect(st, prompt)
		stat, df := chiSquareTwoSample(plain, got, 10)
		crit := chiSquareCritical(df, 3.090) // p = 0.001
		t.Logf("%s: %d of %d draft tokens accepted; chi-square %.1f on %d degrees of freedom (critical %.1f); %d outcomes without drafts, %d with",
			c.name, accepted, drafted, stat, df, crit, len(plain), len(got))
		if accepted == 0 || df < 3 {
			t.Fatalf("%s: %d draft tokens accepted, %d degrees of freedom: the test has nothing to judge", c.name, accepted, df)
		}
		if (stat <= crit) != c.same {
			t.Fatalf("%s: chi-square %.1f against a critical %.1f: want the distributions %s", c.name, stat, crit, map[bool]string{true: "alike", false: "told apart"}[c.same])
		}
		st.close(t)
	}
}

// chiSquareTwoSample is the two-sample chi-square statistic of two count
// tables of equal totals, and its degrees of freedom, outcomes seen fewer
// than minCount times in both together pooled into one.
func chiSquareTwoSample(a, b map[string]int, minCount int) (float64, int) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var stat float64
	bins, restA, restB := 0, 0, 0
	add := func(x, y int) {
		stat += float64((x-y)*(x-y)) / float64(x+y)
		bins++
	}
	for _, k := range keys {
		if a[k]+b[k] < minCount {
			restA += a[k]
			restB += b[k]
			continue
		}
		add(a[k], b[k])
	}
	if restA+restB > 0 {
		add(restA, restB)
	}
	return stat, bins - 1
}

// chiSquareCritical is the chi-square quantile for df degrees of freedom
// at the normal quantile z (Wilson and Hilferty's approximation).
func chiSquareCritical(df int, z float64) float64 {
	k := float64(df)
	c := 2 / (9 * k)
	return k * math.Pow(1-c+z*math.Sqrt(c), 3)
}
