package cgo

import (
	"errors"
	"math"
	"slices"
	"testing"

	"superfluid/engine"
)

// specLane is one lane of a drafted run: its prompt and admission.
type specLane struct {
	prompt []engine.Token
	admit  engine.Admit
	bias   []engine.LogitBias
}

// specResult is what a run produced: each lane's tokens and logprobs, its
// sequence's length when it finished, and the timings summed.
type specResult struct {
	out     [][]engine.Token
	lp      [][]float32
	seqLen  []int
	timings engine.Timings
}

// runDrafted runs lanes to their ends, lane i on sequence i, prefilling
// each prompt in one chunk, then decoding with the draft draft returns for
// the lane (nil: none) from its output so far and the step's number.
func runDrafted(t *testing.T, e *Engine, lanes []specLane, draft func(i int, out []engine.Token, step int) []engine.Token) specResult {
	t.Helper()
	const base = 300
	var p engine.Plan
	r := specResult{out: make([][]engine.Token, len(lanes)), lp: make([][]float32, len(lanes)), seqLen: make([]int, len(lanes))}
	for i, l := range lanes {
		if err := e.Free(int32(i)); err != nil {
			t.Fatal(err)
		}
		a := l.admit
		a.Lane, a.Seq = uint32(base+i), int32(i)
		p.AddAdmit(a, l.prompt, l.bias)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: a.Lane, Count: uint32(len(l.prompt))})
	}
	for step := 0; !p.Empty(); step++ {
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		r.timings.DraftTokens += ev.Timings.DraftTokens
		r.timings.DraftAccepted += ev.Timings.DraftAccepted
		r.timings.DecodeTokens += ev.Timings.DecodeTokens
		p.Reset()
		for _, te := range ev.Tokens {
			i := te.Lane - base
			r.out[i] = append(r.out[i], te.Token)
			r.lp[i] = append(r.lp[i], te.Logprob)
		}
		for _, le := range ev.Lanes {
			i := int(le.Lane - base)
			if le.Status != engine.StatusOK {
				t.Fatalf("lane %d: status %v", i, le.Status)
			}
			if le.Finish != engine.FinishNone {
				r.seqLen[i] = e.SeqLen(int32(i))
				p.Retires = append(p.Retires, le.Lane)
				continue
			}
			var d []engine.Token
			if draft != nil {
				d = draft(i, r.out[i], step)
			}
			p.AddDraft(le.Lane, d)
		}
	}
	return r
}

// oracleDrafts drafts the next k tokens of the plain run's output, with
// one of them (which, by step) wrong, so that each step accepts a
// different share of its draft: none, some, or all.
func oracleDrafts(plain [][]engine.Token, k int) func(i int, out []engine.Token, step int) []engine.Token {
	return func(i int, out []engine.Token, step int) []engine.Token {
		ref := plain[i]
		if len(out) >= len(ref) {
			return nil
		}
		d := slices.Clone(ref[len(out):min(len(ref), len(out)+k)])
		if bad := step % (k + 1); bad < len(d) {
			d[bad] = (d[bad] + 1) % 200
		}
		return d
	}
}

// Drafted lanes give exactly the tokens (and logprobs) of plain decoding,
// whatever share of each draft is accepted, for greedy lanes, lanes with
// bias and penalties, sampled lanes (the positional draw: a sampled draft
// token is accepted with its probability, as speculative sampling's rule
// does for a point-mass draft) and lanes with logprobs; and each leaves
// its sequence as plain decoding does.
func TestDraftsGiveThePlainTokens(t *testing.T) {
	e := openTest(t, 4)
	sampled := engine.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1, PenaltyLastN: 64, Seed: 11}
	penalized := engine.Sampling{TopP: 1, RepeatPenalty: 1.3, FrequencyPenalty: 0.2, PresencePenalty: 0.1, PenaltyLastN: 64}
	lanes := []specLane{
		{prompt: promptTokens(t, e, 20, "greedy"), admit: engine.Admit{MaxTokens: 40, Sampling: engine.Greedy()}},
		{prompt: promptTokens(t, e, 17, "penalties"), admit: engine.Admit{MaxTokens: 40, Sampling: penalized},
			bias: []engine.LogitBias{{Token: 5, Bias: 2}, {Token: 9, Bias: float32(math.Inf(-1))}}},
		{prompt: promptTokens(t, e, 25, "sampled"), admit: engine.Admit{MaxTokens: 40, Sampling: sampled}},
		{prompt: promptTokens(t, e, 14, "logprobs"), admit: engine.Admit{MaxTokens: 40, Logprobs: 3, Sampling: engine.Greedy()}},
	}
	plain := runDrafted(t, e, lanes, nil)
	for _, k := range []int{1, 3, 6} {
		got := runDrafted(t, e, lanes, oracleDrafts(plain.out, k))
		for i := range lanes {
			if !slices.Equal(got.out[i], plain.out[i]) {
				t.Fatalf("k %d lane %d: drafted %v\nplain %v", k, i, got.out[i], plain.out[i])
			}
			for j := range got.lp[i] {
				if d := math.Abs(float64(got.lp[i][j] - plain.lp[i][j])); d > 1e-3 {
					t.Fatalf("k %d lane %d token %d: logprob %v, plain %v", k, i, j, got.lp[i][j], plain.lp[i][j])
				}
			}
			if got.seqLen[i] != plain.seqLen[i] || got.seqLen[i] != len(lanes[i].prompt)+len(plain.out[i])-1 {
				t.Fatalf("k %d lane %d: the sequence holds %d tokens, plain %d", k, i, got.seqLen[i], plain.seqLen[i])
			}
		}
		tm := got.timings
		if tm.DraftAccepted == 0 || tm.DraftAccepted >= tm.DraftTokens {
			t.Fatalf("k %d: %d of %d draft tokens accepted", k, tm.DraftAccepted, tm.DraftTokens)
		}
		t.Logf("k %d: %d of %d draft tokens accepted, %d decode rows (plain %d)", k, tm.DraftAccepted, tm.DraftTokens, tm.DecodeTokens, plain.timings.DecodeTokens)
	}
}

// A grammar lane with drafts gives its plain tokens: each drafted row is
// checked against the grammar as a plain step would be.
func TestDraftsKeepGrammars(t *testing.T) {
	e := openTest(t, 2)
	gid := mustAcquire(t, e, engine.GrammarSpec{GBNF: jsonGBNF})
	sampled := engine.Sampling{Temperature: 1.2, TopP: 1, RepeatPenalty: 1, PenaltyLastN: 64, Seed: 3}
	lanes := []specLane{
		{prompt: promptTokens(t, e, 12, "grammar"), admit: engine.Admit{MaxTokens: 120, Grammar: gid, Sampling: engine.Greedy()}},
		{prompt: promptTokens(t, e, 15, "grammar2"), admit: engine.Admit{MaxTokens: 120, Grammar: gid, Sampling: sampled}},
	}
	plain := runDrafted(t, e, lanes, nil)
	got := runDrafted(t, e, lanes, oracleDrafts(plain.out, 4))
	for i := range lanes {
		if !slices.Equal(got.out[i], plain.out[i]) {
			t.Fatalf("lane %d: drafted %q\nplain %q", i, text(e, got.out[i]), text(e, plain.out[i]))
		}
	}
	if got.timings.DraftAccepted == 0 {
		t.Fatal("no draft token accepted")
	}
}

// After a drafted run the sequence is what plain decoding leaves: a
// follow-up turn on the cached sequence continues identically.
func TestDraftRollbackLeavesTheCacheAsPlain(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 30, "follow-up")
	lanes := []specLane{{prompt: prompt, admit: engine.Admit{MaxTokens: 24, Sampling: engine.Greedy()}}}
	plain := runDrafted(t, e, lanes, nil)
	turn := append(append(slices.Clone(prompt), plain.out[0]...), promptTokens(t, e, 9, "next turn")...)
	want := continueFrom(t, e, 0, turn, plain.seqLen[0], 16)
	got := runDrafted(t, e, lanes, oracleDrafts(plain.out, 5))
	if got.seqLen[0] != plain.seqLen[0] {
		t.Fatalf("drafted sequence holds %d tokens, plain %d", got.seqLen[0], plain.seqLen[0])
	}
	if again := continueFrom(t, e, 0, turn, got.seqLen[0], 16); !slices.Equal(again, want) {
		t.Fatalf("follow-up after drafts %v\nafter plain %v", again, want)
	}
}

// ngramDraftOf is prompt-lookup drafting as sched does it, for the tests.
func ngramDraftOf(history []engine.Token, k int) []engine.Token {
	h := len(history)
	for n := min(3, h-1); n >= 1; n-- {
		for j := h - n - 1; j >= 0; j-- {
			if slices.Equal(history[j:j+n], history[h-n:]) {
				return slices.Clone(history[j+n : min(j+n+k, h)])
			}
		}
	}
	return nil
}

// On a prompt that repeats itself, n-gram drafts are accepted and the
// output is the plain one.
func TestNgramDraftsOnRepeatedText(t *testing.T) {
	e := openTest(t, 2)
	var prompt []engine.Token
	unit := promptTokens(t, e, 23, "repeat")
	for range 4 {
		prompt = append(prompt, unit...)
	}
	lanes := []specLane{
		{prompt: prompt, admit: engine.Admit{MaxTokens: 64, Sampling: engine.Greedy()}},
		{prompt: prompt[5:], admit: engine.Admit{MaxTokens: 64, Sampling: engine.Greedy()}},
	}
	plain := runDrafted(t, e, lanes, nil)
	got := runDrafted(t, e, lanes, func(i int, out []engine.Token, _ int) []engine.Token {
		return ngramDraftOf(append(slices.Clone(lanes[i].prompt), out...), 4)
	})
	for i := range lanes {
		if !slices.Equal(got.out[i], plain.out[i]) {
			t.Fatalf("lane %d: drafted %v\nplain %v", i, got.out[i], plain.out[i])
		}
	}
	tm := got.timings
	t.Logf("%d of %d n-gram draft tokens accepted; %d tokens in %d decode rows", tm.DraftAccepted, tm.DraftTokens, len(got.out[0])+len(got.out[1]), tm.DecodeTokens)
	if tm.DraftAccepted == 0 {
		t.Fatal("no n-gram draft token accepted on repeated text")
	}
}

func TestBadDraftsAreRefused(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 10, "bad drafts")
	e.Free(0)
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: uint32(len(prompt))})
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	for name, build := range map[string]func(p *engine.Plan){
		"outside the plan's tokens": func(p *engine.Plan) { p.AddDraft(1, []engine.Token{5}); p.Decodes[0].DraftLen = 9 },
		"outside the vocabulary":    func(p *engine.Plan) { p.AddDraft(1, []engine.Token{5, 1 << 30}) },
		"negative token":            func(p *engine.Plan) { p.AddDraft(1, []engine.Token{-1}) },
		"past the context":          func(p *engine.Plan) { p.AddDraft(1, make([]engine.Token, 1024-10)) },
		"over the batch":            func(p *engine.Plan) { p.AddDraft(1, make([]engine.Token, 256)) },
		"synthetic accepts past the draft": func(p *engine.Plan) {
			p.AddDraft(1, []engine.Token{5})
			p.Decodes[0].SynthAccept = 2
		},
		"synthetic accepts without a draft": func(p *engine.Plan) { p.Decodes = []engine.Decode{{Lane: 1, SynthAccept: 1}} },
	} {
		p.Reset()
		build(&p)
		_, err := e.Tick(&p)
		var ee *engine.Error
		if err == nil || !errors.As(err, &ee) {
			t.Fatalf("%s: %v", name, err)
		}
		if name != "over the batch" && (!ee.HasLane || ee.Lane != 1 || ee.Status != engine.StatusInvalid) {
			t.Fatalf("%s: %+v", name, ee)
		}
	}
	// The lane is untouched: it decodes on.
	p.Reset()
	p.AddDraft(1, []engine.Token{5, 6})
	if ev, err := e.Tick(&p); err != nil || len(ev.Tokens) == 0 {
		t.Fatalf("after refusals: %v", err)
	}
}

// Synthetic acceptance commits the draft tokens it is told to, whatever
// the model says, then samples the row after them; a grammar lane cannot
// take it.
func TestSynthAcceptCommitsTheDraft(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 10, "synthetic")
	e.Free(0)
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 50, Logprobs: 1, Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: uint32(len(prompt))})
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	draft := []engine.Token{17, 18, 19, 20}
	p.Reset()
	p.AddDraft(1, draft)
	p.Decodes[0].SynthAccept = 3
	ev, err := e.Tick(&p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Tokens) != 4 || ev.Tokens[0].Token != 17 || ev.Tokens[1].Token != 18 || ev.Tokens[2].Token != 19 ||
		ev.Timings.DraftTokens != 4 || ev.Timings.DraftAccepted != 3 {
		t.Fatalf("tokens %+v, timings %+v", ev.Tokens, ev.Timings)
	}
	if n := e.SeqLen(0); n != len(prompt)+4 {
		t.Fatalf("the sequence holds %d tokens, want the prompt, the fed token and 3 drafts: %d", n, len(prompt)+4)
	}
	gid := mustAcquire(t, e, engine.GrammarSpec{GBNF: yesNoGBNF})
	p.Reset()
	p.Retires = []uint32{1}
	e.Free(1)
	p.AddAdmit(engine.Admit{Lane: 2, Seq: 1, Grammar: gid, Sampling: engine.Greedy()}, prompt, nil)
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 2, Count: uint32(len(prompt))})
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	p.AddDraft(2, []engine.Token{5})
	p.Decodes[0].SynthAccept = 1
	if _, err := e.Tick(&p); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("synthetic accepts on a grammar lane: %v", err)
	}
}

func TestSteadyStateDraftedTickAllocatesNothing(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 8, "drafted allocs")
	var p engine.Plan
	for i := range 2 {
		e.Free(int32(i))
		p.AddAdmit(engine.Admit{Lane: uint32(i), Seq: int32(i), Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: uint32(i), Count: uint32(len(prompt))})
	}
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	draft := []engine.Token{5, 6, 7}
	allocs := testing.AllocsPerRun(30, func() {
		p.Reset()
		p.AddDraft(0, draft)
		p.AddDraft(1, draft[:2])
		if _, err := e.Tick(&p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a steady-state drafted tick allocates %v times", allocs)
	}
}
