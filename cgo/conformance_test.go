package cgo

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// The fake engine the scheduler's tests run against must refuse exactly
// what this engine refuses, with the same status and the same blamed
// lane, or those tests prove nothing about plans the real engine would
// refuse. The same malformed plans go through both, from the same state.

// conformanceEngines opens the tiny model and a fake with its shape, and
// brings both to the same state: lane 1 decoding (seq 0), lane 2 with 4 of
// its 16 prompt tokens prefilled (seq 1), lane 3 finished (seq 2, one
// token allowed), one lane slot free.
func conformanceEngines(t *testing.T) (real *Engine, fake *enginetest.Fake, prompt []engine.Token) {
	t.Helper()
	const lanes, seqs, batch, ctx = 4, 8, 32, 256
	real, err := Open(Options{ModelPath: tinyModel(t), Ctx: ctx, Lanes: lanes, Seqs: seqs, Batch: batch, Threads: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { real.Close() })
	d := real.Descriptor()
	fake = enginetest.New(d.Lanes, d.Batch, d.Seqs, d.Ctx, nil)
	fake.SetVocab(d.Vocab)
	fake.Descriptor().Drafts, fake.Descriptor().DraftMax = d.Drafts, d.DraftMax
	if fd := fake.Descriptor(); fd.Lanes != d.Lanes || fd.Batch != d.Batch || fd.Seqs != d.Seqs || fd.Ctx != d.Ctx {
		t.Fatalf("the fake's shape %+v differs from the engine's", fd)
	}
	prompt = promptTokens(t, real, 40, "conformance")
	var base engine.Plan
	base.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Sampling: engine.Greedy()}, prompt[:8], nil)
	base.AddAdmit(engine.Admit{Lane: 2, Seq: 1, Sampling: engine.Greedy()}, prompt[:16], nil)
	base.AddAdmit(engine.Admit{Lane: 3, Seq: 2, MaxTokens: 1, Sampling: engine.Greedy()}, prompt[8:16], nil)
	base.Prefills = []engine.Prefill{{Lane: 1, Count: 8}, {Lane: 2, Count: 4}, {Lane: 3, Count: 8}}
	for name, e := range map[string]engine.Engine{"real": real, "fake": fake} {
		ev, err := e.Tick(&base)
		if err != nil {
			t.Fatalf("%s: the base plan: %v", name, err)
		}
		if len(ev.Tokens) != 2 {
			t.Fatalf("%s: the base plan sampled %d tokens, want 2", name, len(ev.Tokens))
		}
	}
	return real, fake, prompt
}

// malformedPlan is a plan the engines must refuse, built on the base state.
type malformedPlan struct {
	name  string
	build func(p *engine.Plan, prompt []engine.Token)
}

func malformedPlans() []malformedPlan {
	greedy := engine.Greedy()
	sampled := func(mod func(s *engine.Sampling)) engine.Sampling {
		s := engine.Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, PenaltyLastN: 64, Seed: 1}
		mod(&s)
		return s
	}
	admit := func(lane uint32, seq int32, n int, s engine.Sampling) func(p *engine.Plan, prompt []engine.Token) {
		return func(p *engine.Plan, prompt []engine.Token) {
			p.Retires = append(p.Retires, 3) // a free slot for one more
			p.AddAdmit(engine.Admit{Lane: lane, Seq: seq, Sampling: s}, prompt[:n], nil)
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: lane, Count: uint32(n)})
		}
	}
	withBias := func(bias func(vocab int) []engine.LogitBias) func(p *engine.Plan, prompt []engine.Token) {
		return func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: sampled(func(*engine.Sampling) {})}, prompt[:4], bias(conformanceVocab))
		}
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	plans := []malformedPlan{
		{"retire an unknown lane", func(p *engine.Plan, _ []engine.Token) { p.Retires = []uint32{9} }},
		{"retire a lane twice", func(p *engine.Plan, _ []engine.Token) { p.Retires = []uint32{1, 1} }},
		{"more lanes than the engine", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, prompt[:4], nil)
			p.AddAdmit(engine.Admit{Lane: 5, Seq: 4, Sampling: greedy}, prompt[:4], nil)
		}},
		{"admit a lane that exists", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 1, Seq: 5, Sampling: greedy}, prompt[:4], nil)
		}},
		{"admit a lane twice", func(p *engine.Plan, prompt []engine.Token) {
			p.Retires = []uint32{3}
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, prompt[:4], nil)
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 4, Sampling: greedy}, prompt[:4], nil)
		}},
		{"two admits on one sequence", func(p *engine.Plan, prompt []engine.Token) {
			p.Retires = []uint32{3, 2}
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, prompt[:4], nil)
			p.AddAdmit(engine.Admit{Lane: 5, Seq: 3, Sampling: greedy}, prompt[:4], nil)
		}},
		{"sequence out of range", admit(4, 99, 4, greedy)},
		{"negative sequence", admit(4, -1, 4, greedy)},
		{"sequence busy", admit(4, 0, 4, greedy)},
		{"empty prompt", admit(4, 3, 0, greedy)},
		{"prompt outside the plan's tokens", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, prompt[:4], nil)
			p.Admits[0].PromptLen = 50
		}},
		{"prompt longer than the context", func(p *engine.Plan, _ []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, make([]engine.Token, 257), nil)
		}},
		{"cached the whole prompt", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 0, Cached: 4, Sampling: greedy}, prompt[:4], nil)
			p.Retires = []uint32{1}
		}},
		{"cached tokens the sequence lacks", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Cached: 2, Sampling: greedy}, prompt[:4], nil)
		}},
		{"token outside the vocabulary", func(p *engine.Plan, _ []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, []engine.Token{5, 1 << 30}, nil)
		}},
		{"negative token", func(p *engine.Plan, _ []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, []engine.Token{5, -1}, nil)
		}},
		{"bias outside the plan", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, prompt[:4], nil)
			p.Admits[0].BiasLen = 3
		}},
		{"too many logprobs", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Logprobs: engine.MaxLogprobs + 1, Sampling: greedy}, prompt[:4], nil)
		}},
		{"negative logprobs", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Logprobs: -1, Sampling: greedy}, prompt[:4], nil)
		}},
		{"unknown grammar", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Grammar: 9999, Sampling: greedy}, prompt[:4], nil)
		}},
		{"grammar replay without a grammar", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, GrammarReplay: 2, Sampling: greedy}, prompt[:4], nil)
		}},
		{"grammar replay past the prompt", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Grammar: 9999, GrammarReplay: 5, Sampling: greedy}, prompt[:4], nil)
		}},
		{"prefill an unknown lane", func(p *engine.Plan, _ []engine.Token) {
			p.Prefills = []engine.Prefill{{Lane: 9, Count: 1}}
		}},
		{"prefill a lane retired in the plan", func(p *engine.Plan, _ []engine.Token) {
			p.Retires = []uint32{2}
			p.Prefills = []engine.Prefill{{Lane: 2, Offset: 4, Count: 1}}
		}},
		{"prefill nothing", func(p *engine.Plan, _ []engine.Token) {
			p.Prefills = []engine.Prefill{{Lane: 2, Offset: 4, Count: 0}}
		}},
		{"prefill past the prompt", func(p *engine.Plan, _ []engine.Token) {
			p.Prefills = []engine.Prefill{{Lane: 2, Offset: 4, Count: 13}}
		}},
		{"prefill from the wrong offset", func(p *engine.Plan, _ []engine.Token) {
			p.Prefills = []engine.Prefill{{Lane: 2, Offset: 3, Count: 1}}
		}},
		{"prefill a lane twice", func(p *engine.Plan, _ []engine.Token) {
			p.Prefills = []engine.Prefill{{Lane: 2, Offset: 4, Count: 2}, {Lane: 2, Offset: 4, Count: 2}}
		}},
		{"decode an unknown lane", func(p *engine.Plan, _ []engine.Token) {
			p.Decodes = []engine.Decode{{Lane: 9}}
		}},
		{"decode a finished lane", func(p *engine.Plan, _ []engine.Token) {
			p.Decodes = []engine.Decode{{Lane: 3}}
		}},
		{"decode a lane twice", func(p *engine.Plan, _ []engine.Token) {
			p.Decodes = []engine.Decode{{Lane: 1}, {Lane: 1}}
		}},
		{"decode a lane still prefilling", func(p *engine.Plan, _ []engine.Token) {
			p.Decodes = []engine.Decode{{Lane: 2}}
		}},
		{"decode an admit without its prefill", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, prompt[:4], nil)
			p.Decodes = []engine.Decode{{Lane: 4}}
		}},
		{"a draft outside the plan's tokens", func(p *engine.Plan, _ []engine.Token) {
			p.AddDraft(1, []engine.Token{5})
			p.Decodes[0].DraftLen = 9
		}},
		{"a draft token outside the vocabulary", func(p *engine.Plan, _ []engine.Token) {
			p.AddDraft(1, []engine.Token{5, engine.Token(conformanceVocab)})
		}},
		{"a negative draft token", func(p *engine.Plan, _ []engine.Token) { p.AddDraft(1, []engine.Token{-1}) }},
		{"a draft past the context", func(p *engine.Plan, _ []engine.Token) { p.AddDraft(1, make([]engine.Token, 248)) }},
		{"a draft over the batch", func(p *engine.Plan, _ []engine.Token) { p.AddDraft(1, make([]engine.Token, 32)) }},
		{"synthetic accepts past the draft", func(p *engine.Plan, _ []engine.Token) {
			p.AddDraft(1, []engine.Token{5})
			p.Decodes[0].SynthAccept = 2
		}},
		{"synthetic accepts without a draft", func(p *engine.Plan, _ []engine.Token) {
			p.Decodes = []engine.Decode{{Lane: 1, SynthAccept: 1}}
		}},
		{"a draft on a lane twice decoded", func(p *engine.Plan, _ []engine.Token) {
			p.AddDraft(1, []engine.Token{5})
			p.AddDraft(1, []engine.Token{6})
		}},
		{"a first step over the batch", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: greedy}, prompt[:30], nil)
			p.Prefills = []engine.Prefill{{Lane: 4, Count: 30}, {Lane: 2, Offset: 4, Count: 2}}
			p.Decodes = []engine.Decode{{Lane: 1}}
		}},
		{"bad sampling under a step over the batch", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Sampling: sampled(func(s *engine.Sampling) { s.TopP = 0 })}, prompt[:30], nil)
			p.Prefills = []engine.Prefill{{Lane: 4, Count: 30}, {Lane: 2, Offset: 4, Count: 3}}
		}},
		{"a bad admit beside a bad prefill", func(p *engine.Plan, prompt []engine.Token) {
			p.Prefills = []engine.Prefill{{Lane: 2, Offset: 3, Count: 1}}
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 99, Sampling: greedy}, prompt[:4], nil)
		}},
		{"infinite temperature", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.Temperature = inf }))},
		{"negative top_k", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.TopK = -1 }))},
		{"top_p of 0", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.TopP = 0 }))},
		{"top_p above 1", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.TopP = 1.5 }))},
		{"NaN top_p", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.TopP = nan }))},
		{"min_p above 1", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.MinP = 1.01 }))},
		{"zero repeat penalty", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.RepeatPenalty = 0 }))},
		{"infinite repeat penalty", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.RepeatPenalty = inf }))},
		{"huge frequency penalty", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.FrequencyPenalty = 2e6 }))},
		{"NaN presence penalty", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.PresencePenalty = nan }))},
		{"penalty window below -1", admit(4, 3, 4, sampled(func(s *engine.Sampling) { s.PenaltyLastN = -2 }))},
		{"greedy with a bad top_p", admit(4, 3, 4, engine.Sampling{TopP: 2, RepeatPenalty: 1})},
		{"bias for a token outside the vocabulary", withBias(func(vocab int) []engine.LogitBias {
			return []engine.LogitBias{{Token: engine.Token(vocab), Bias: 1}}
		})},
		// The conformance engines load no adapter: any scale is too many.
		{"LoRA scales without adapters", func(p *engine.Plan, prompt []engine.Token) {
			p.Decodes = []engine.Decode{{Lane: 1}}
			p.LoRA = []float32{1}
		}},
		{"LoRA scales without adapters, bad admit too", func(p *engine.Plan, prompt []engine.Token) {
			p.AddAdmit(engine.Admit{Lane: 4, Seq: 99, Sampling: greedy}, prompt[:4], nil)
			p.LoRA = []float32{0}
		}},
		{"bias for a negative token", withBias(func(int) []engine.LogitBias { return []engine.LogitBias{{Token: -3, Bias: 1}} })},
		{"NaN bias", withBias(func(int) []engine.LogitBias { return []engine.LogitBias{{Token: 5, Bias: nan}} })},
		{"a bias that bans every token", withBias(func(vocab int) []engine.LogitBias {
			b := make([]engine.LogitBias, vocab)
			for i := range b {
				b[i] = engine.LogitBias{Token: engine.Token(i), Bias: float32(math.Inf(-1))}
			}
			return b
		})},
	}
	return plans
}

// conformanceVocab is the tiny model's vocabulary, set before the plans
// are built.
var conformanceVocab int

func TestFakeEngineRefusesWhatTheEngineRefuses(t *testing.T) {
	real, fake, prompt := conformanceEngines(t)
	conformanceVocab = real.Descriptor().Vocab
	for _, c := range malformedPlans() {
		t.Run(c.name, func(t *testing.T) {
			var p engine.Plan
			c.build(&p, prompt)
			_, rerr := real.Tick(&p)
			_, ferr := fake.Tick(&p)
			if rerr == nil || ferr == nil {
				t.Fatalf("not refused: the engine says %v, the fake %v", rerr, ferr)
			}
			if got, want := verdict(ferr), verdict(rerr); got != want {
				t.Fatalf("the fake says %s (%v), the engine %s (%v)", got, ferr, want, rerr)
			}
		})
	}
	// Refused plans changed nothing, in either: the same next plan runs on
	// both and leaves the lanes where it should.
	next := engine.Plan{
		Retires:  []uint32{3},
		Prefills: []engine.Prefill{{Lane: 2, Offset: 4, Count: 12}},
		Decodes:  []engine.Decode{{Lane: 1}},
	}
	for name, e := range map[string]engine.Engine{"real": real, "fake": fake} {
		ev, err := e.Tick(&next)
		if err != nil {
			t.Fatalf("%s: the plan after the refusals: %v", name, err)
		}
		for _, le := range ev.Lanes {
			want := map[uint32][2]uint32{1: {8, 9}, 2: {16, 16}}[le.Lane]
			if le.Prefilled != want[0] || le.NPast != want[1] {
				t.Errorf("%s: lane %d holds %d prompt and %d tokens, want %d and %d", name, le.Lane, le.Prefilled, le.NPast, want[0], want[1])
			}
		}
		if len(ev.Lanes) != 2 {
			t.Errorf("%s: %d lanes touched, want 2", name, len(ev.Lanes))
		}
	}
}

// verdict is what the scheduler acts on: the status and the blamed lane.
func verdict(err error) string {
	var e *engine.Error
	if !errors.As(err, &e) {
		return fmt.Sprintf("not an engine error: %v", err)
	}
	if lane, ok := engine.FaultLane(err); ok {
		return fmt.Sprintf("%s, blaming lane %d", e.Status, lane)
	}
	return fmt.Sprintf("%s, blaming no lane", e.Status)
}

// The fake compiles (or refuses) the grammars the engine compiles (or
// refuses), and both refuse an admission naming a grammar they dropped.
func TestFakeGrammarsMatchTheEngine(t *testing.T) {
	real, fake, prompt := conformanceEngines(t)
	specs := []engine.GrammarSpec{
		{GBNF: `root ::= "a" | "b"`},
		{GBNF: "root ::= x\nx ::= [a-z]+", Root: "x"},
		{GBNF: `root ::= "a"`, Root: "nope"},
		{GBNF: `root ::= "a"`, Lazy: true, TriggerTokens: []engine.Token{5}},
		{GBNF: `root ::= "a"`, Lazy: true, TriggerTokens: []engine.Token{engine.Token(real.Descriptor().Vocab)}},
		{GBNF: `root ::= "a"`, Lazy: true, TriggerPatterns: []string{"<x>"}},
		{GBNF: `root ::= "a"`, Lazy: true, TriggerPatterns: []string{"(?<=x)"}},
		{GBNF: `root ::= root "a"`},
		{GBNF: `root ::= ` + strings.Repeat("(", 200) + `"a"` + strings.Repeat(")", 200)},
		{GBNF: ""},
	}
	for i, g := range specs {
		rid, rerr := real.AcquireGrammar(&g)
		fid, ferr := fake.AcquireGrammar(&g)
		if (rerr == nil) != (ferr == nil) || (rerr != nil && !(errors.Is(rerr, engine.ErrGrammar) && errors.Is(ferr, engine.ErrGrammar))) {
			t.Errorf("spec %d (%q): the engine says %v, the fake %v", i, g.GBNF, rerr, ferr)
		}
		if rerr == nil {
			real.ReleaseGrammar(rid)
		}
		if ferr == nil {
			fake.ReleaseGrammar(fid)
		}
	}
	// Admitting with a grammar both hold is fine on both.
	g := engine.GrammarSpec{GBNF: `root ::= [a-z ]+`}
	ids := map[string]engine.GrammarID{}
	for name, e := range map[string]engine.Grammars{"real": real, "fake": fake} {
		id, err := e.AcquireGrammar(&g)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	for name, e := range map[string]engine.Engine{"real": real, "fake": fake} {
		var p engine.Plan
		p.Retires = []uint32{3}
		p.AddAdmit(engine.Admit{Lane: 4, Seq: 3, Grammar: ids[name], Sampling: engine.Greedy()}, prompt[:4], nil)
		p.Prefills = []engine.Prefill{{Lane: 4, Count: 4}}
		if _, err := e.Tick(&p); err != nil {
			t.Fatalf("%s: admit with a grammar: %v", name, err)
		}
	}
}
