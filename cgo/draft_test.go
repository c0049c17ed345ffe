package cgo

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

// draftModel writes (once) a tiny model with the built-in vocabulary
// padded to vocab tokens (0: unpadded) and weights from seed.
func draftModel(t testing.TB, seed uint64, vocab int) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := fmt.Sprintf("draft-%d-%d", seed, vocab)
	if p, ok := modelMemo[key]; ok {
		return p
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if vocab > 0 {
		shape.Vocab = vocab
	}
	path := filepath.Join(modelDir, key+".gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: seed}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// openDrafter opens path as a draft engine for target's lanes.
func openDrafter(t testing.TB, target *Engine, path string, pMin float32) *Drafter {
	t.Helper()
	lanes := target.Descriptor().Lanes
	e, err := Open(Options{ModelPath: path, Ctx: target.Descriptor().Ctx, Lanes: lanes, Seqs: lanes, Batch: 64, Threads: 1})
	if err != nil {
		t.Fatalf("open draft: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	d, err := NewDrafter(e, target, pMin)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A draft model must have the target's vocabulary: another seed's weights
// over the same tokens will do, a vocabulary of other size will not.
func TestDraftVocabularyCheck(t *testing.T) {
	target := openTest(t, 1)
	openDrafter(t, target, draftModel(t, 8, 0), 0)
	other, err := Open(Options{ModelPath: draftModel(t, 8, synth.BuiltinVocabSize()+1000), Ctx: 256, Lanes: 1, Seqs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = CheckDraftVocab(target, other)
	if err == nil || !strings.Contains(err.Error(), "tokens, the model has") {
		t.Fatalf("a vocabulary 1000 tokens larger: %v", err)
	}
	if _, err := NewDrafter(other, target, 0); err == nil {
		t.Fatal("NewDrafter took an incompatible draft model")
	}
}

// modelDrafts drafts k tokens for lane i from its history (prompt and
// output so far), one Draft call per lane and step.
func modelDrafts(t *testing.T, d *Drafter, lanes []specLane, k int) func(i int, out []engine.Token, step int) []engine.Token {
	return func(i int, out []engine.Token, _ int) []engine.Token {
		h := append(slices.Clone(lanes[i].prompt), out...)
		reqs := []engine.DraftRequest{{Lane: uint32(i), History: h, Max: k}}
		if _, err := d.Draft(reqs); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(reqs[0].Draft)
	}
}

// Drafts from a model give the plain tokens (greedy lanes: a sampled
// lane's draw on the tiny model's near-uniform logits may flip with the
// step's shape, which moves logprobs by ~1e-5; the distribution test in
// e2e covers sampled lanes). A draft model with the target's own weights
// drafts what the target decodes greedily, so nearly every draft token
// lands; one with other weights seldom does, and its rejected drafts are
// cut out of its sequences as they are out of the target's.
func TestDraftModelGivesThePlainTokens(t *testing.T) {
	e := openTest(t, 3)
	penalized := engine.Sampling{TopP: 1, RepeatPenalty: 1.3, FrequencyPenalty: 0.2, PresencePenalty: 0.1, PenaltyLastN: 64}
	lanes := []specLane{
		{prompt: promptTokens(t, e, 20, "greedy"), admit: engine.Admit{MaxTokens: 40, Sampling: engine.Greedy()}},
		{prompt: promptTokens(t, e, 25, "penalties"), admit: engine.Admit{MaxTokens: 40, Sampling: penalized}},
		{prompt: promptTokens(t, e, 14, "logprobs"), admit: engine.Admit{MaxTokens: 40, Logprobs: 3, Sampling: engine.Greedy()}},
	}
	plain := runDrafted(t, e, lanes, nil)
	for _, c := range []struct {
		name               string
		path               string
		minShare, maxShare float64
	}{
		{"same weights", tinyModel(t), 0.8, 1}, // the drafter knows no penalties
		{"other weights", draftModel(t, 8, 0), 0, 0.3},
	} {
		d := openDrafter(t, e, c.path, 0)
		got := runDrafted(t, e, lanes, modelDrafts(t, d, lanes, 4))
		for i := range lanes {
			if !slices.Equal(got.out[i], plain.out[i]) {
				t.Fatalf("%s lane %d: drafted %v\nplain %v", c.name, i, got.out[i], plain.out[i])
			}
		}
		tm := got.timings
		share := float64(tm.DraftAccepted) / float64(max(tm.DraftTokens, 1))
		t.Logf("%s: %d of %d draft tokens accepted", c.name, tm.DraftAccepted, tm.DraftTokens)
		if tm.DraftTokens == 0 || share < c.minShare || share > c.maxShare {
			t.Fatalf("%s: %d of %d draft tokens accepted, want a share in [%v, %v]", c.name, tm.DraftAccepted, tm.DraftTokens, c.minShare, c.maxShare)
		}
	}
}

// A lane's draft sequence follows its history wherever it goes — the
// drafts rejected, a turn re-rendered, the lane's tag on another
// conversation — and drafts what a fresh drafter drafts from the same
// history.
func TestDraftModelFollowsTheHistory(t *testing.T) {
	e := openTest(t, 2)
	path := draftModel(t, 8, 0)
	d := openDrafter(t, e, path, 0)
	h := promptTokens(t, e, 30, "history")
	draftOf := func(d *Drafter, hist []engine.Token) []engine.Token {
		t.Helper()
		reqs := []engine.DraftRequest{{Lane: 1, History: hist, Max: 5}}
		if _, err := d.Draft(reqs); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(reqs[0].Draft)
	}
	first := draftOf(d, h)
	if len(first) != 5 {
		t.Fatalf("drafted %v, want 5 tokens", first)
	}
	other := promptTokens(t, e, 12, "another conversation")
	for _, next := range [][]engine.Token{
		append(slices.Clone(h), first[0]+1),                       // the first draft token rejected
		append(append(slices.Clone(h), first[:3]...), first[3]+1), // three accepted
		append(slices.Clone(h), first...),                         // all accepted, no token of the model's own yet
		h[:20],                                                    // cut back into the prompt
		other,                                                     // the tag reused
		h,
	} {
		got := draftOf(d, next)
		fresh := draftOf(openDrafter(t, e, path, 0), next)
		if !slices.Equal(got, fresh) {
			t.Fatalf("history of %d tokens: drafted %v, a fresh drafter %v", len(next), got, fresh)
		}
	}
}

// Several lanes draft in one call, each as it would alone; a minimum
// probability of 1 drafts nothing; malformed requests are refused.
func TestDraftModelBatchesLanes(t *testing.T) {
	e := openTest(t, 3)
	path := draftModel(t, 8, 0)
	d := openDrafter(t, e, path, 0)
	hs := [][]engine.Token{promptTokens(t, e, 9, "a"), promptTokens(t, e, 31, "b"), promptTokens(t, e, 17, "c")}
	reqs := make([]engine.DraftRequest, len(hs))
	for i, h := range hs {
		reqs[i] = engine.DraftRequest{Lane: uint32(10 + i), History: h, Max: 2 + i}
	}
	if _, err := d.Draft(reqs); err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		alone := []engine.DraftRequest{{Lane: 0, History: h, Max: 2 + i}}
		if _, err := openDrafter(t, e, path, 0).Draft(alone); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(reqs[i].Draft, alone[0].Draft) || len(reqs[i].Draft) != 2+i {
			t.Fatalf("lane %d: batched %v, alone %v", i, reqs[i].Draft, alone[0].Draft)
		}
	}
	sure := openDrafter(t, e, path, 1)
	if _, err := sure.Draft(reqs); err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if len(reqs[i].Draft) != 0 {
			t.Fatalf("p_min 1: lane %d drafted %v", i, reqs[i].Draft)
		}
	}
	bad := []engine.DraftRequest{{Lane: 1, History: []engine.Token{-3}, Max: 2}}
	var ee *engine.Error
	if _, err := d.Draft(bad); !errors.As(err, &ee) || ee.Status != engine.StatusInvalid {
		t.Fatalf("a negative token: %v", err)
	}
	twice := []engine.DraftRequest{{Lane: 1, History: hs[0], Max: 2}, {Lane: 1, History: hs[1], Max: 2}}
	if _, err := d.Draft(twice); err == nil {
		t.Fatal("a lane twice in one call was not refused")
	}
	// Still usable.
	if _, err := d.Draft(reqs[:1]); err != nil || len(reqs[0].Draft) != 2 {
		t.Fatalf("after refusals: %v, %v", reqs[0].Draft, err)
	}
}

// A history longer than the draft engine's batch reaches it over several
// calls, a batch a call, drafting nothing until it is in; then the lane
// drafts what a lane with a short history would from the same tokens.
func TestDraftModelCatchesUpABatchACall(t *testing.T) {
	e := openTest(t, 1)
	d := openDrafter(t, e, draftModel(t, 8, 0), 0) // a batch of 64
	h := promptTokens(t, e, 150, "long")
	for call := range 3 {
		reqs := []engine.DraftRequest{{Lane: 1, History: h, Max: 3}}
		if _, err := d.Draft(reqs); err != nil {
			t.Fatal(err)
		}
		if want := call == 2; (len(reqs[0].Draft) == 3) != want {
			t.Fatalf("call %d with 150 tokens to feed, a batch of 64: drafted %v", call, reqs[0].Draft)
		}
	}
}
