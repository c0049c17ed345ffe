package cgo

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/grammar"
)

// The grammars the tests constrain the tiny model with: random weights
// never write these by chance, so every accepted output is the sampler's.
const (
	yesNoGBNF = `root ::= "yes" | "no"`
	// A bounded JSON object: every string and number has a length limit,
	// so the grammar completes within a few dozen tokens.
	jsonGBNF = `root ::= "{" ws "\"name\"" ws ":" ws str ws "," ws "\"age\"" ws ":" ws num ws "}"
str ::= "\"" [a-z]{1,8} "\""
num ::= [1-9] [0-9]{0,2}
ws ::= [ ]?`
)

// grammarRun admits one lane per prompt with the grammar (and replay
// count) given and runs them to the end, returning each lane's tokens and
// its finish.
func grammarRun(t *testing.T, e *Engine, prompts [][]engine.Token, gid engine.GrammarID, replay uint32, s engine.Sampling, maxTokens int) ([][]engine.Token, []engine.Finish, engine.Timings) {
	t.Helper()
	const base = 200
	var p engine.Plan
	out := make([][]engine.Token, len(prompts))
	fin := make([]engine.Finish, len(prompts))
	var sum engine.Timings
	for i, pr := range prompts {
		if err := e.Free(int32(i)); err != nil {
			t.Fatal(err)
		}
		p.AddAdmit(engine.Admit{Lane: uint32(base + i), Seq: int32(i), MaxTokens: uint32(maxTokens), Grammar: gid, GrammarReplay: replay, Sampling: s}, pr, nil)
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: uint32(base + i), Count: uint32(len(pr))})
	}
	for !p.Empty() {
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatalf("tick: %v", err)
		}
		sum.GrammarFast += ev.Timings.GrammarFast
		sum.GrammarMasked += ev.Timings.GrammarMasked
		p.Reset()
		for _, te := range ev.Tokens {
			out[te.Lane-base] = append(out[te.Lane-base], te.Token)
		}
		for _, le := range ev.Lanes {
			i := le.Lane - base
			if le.Finish != engine.FinishNone {
				fin[i] = le.Finish
				if le.Status != engine.StatusOK {
					t.Errorf("lane %d ended with status %v", le.Lane, le.Status)
				}
				p.Retires = append(p.Retires, le.Lane)
			} else {
				p.Decodes = append(p.Decodes, engine.Decode{Lane: le.Lane})
			}
		}
	}
	return out, fin, sum
}

func mustAcquire(t *testing.T, e *Engine, g engine.GrammarSpec) engine.GrammarID {
	t.Helper()
	id, err := e.AcquireGrammar(&g)
	if err != nil {
		t.Fatalf("acquire %q: %v", g.GBNF, err)
	}
	t.Cleanup(func() { e.ReleaseGrammar(id) })
	return id
}

// text is a lane's output, its end-of-generation token (if any) dropped.
func text(e *Engine, toks []engine.Token) string {
	if n := len(toks); n > 0 && e.Descriptor().IsEOG(toks[n-1]) {
		toks = toks[:n-1]
	}
	return e.Detokenize(toks, false)
}

func TestGrammarConstrainsEveryLane(t *testing.T) {
	e := openTest(t, 4)
	sampled := engine.Sampling{Temperature: 1.5, TopK: 0, TopP: 1, RepeatPenalty: 1, PenaltyLastN: 64, Seed: 7}
	penalized := engine.Sampling{Temperature: 0, TopP: 1, RepeatPenalty: 1.3, PenaltyLastN: 64}
	for _, gbnf := range []string{yesNoGBNF, jsonGBNF} {
		oracle, err := grammar.ParseGBNF(gbnf)
		if err != nil {
			t.Fatal(err)
		}
		gid := mustAcquire(t, e, engine.GrammarSpec{GBNF: gbnf})
		for name, s := range map[string]engine.Sampling{"greedy": engine.Greedy(), "sampled": sampled, "penalized": penalized} {
			prompts := make([][]engine.Token, 4)
			for i := range prompts {
				prompts[i] = promptTokens(t, e, 12+i, name+gbnf[:6])
			}
			for seed := range uint64(3) {
				s.Seed = seed
				out, fin, tm := grammarRun(t, e, prompts, gid, 0, s, 200)
				for i := range out {
					got := text(e, out[i])
					if !oracle.Accepts(got) {
						t.Errorf("%s seed %d lane %d: %q does not match %q", name, seed, i, got, gbnf)
					}
					if fin[i] != engine.FinishGrammar && fin[i] != engine.FinishEOG {
						t.Errorf("%s seed %d lane %d: finished %v, want grammar (or eog)", name, seed, i, fin[i])
					}
				}
				if tm.GrammarMasked == 0 || int(tm.GrammarFast+tm.GrammarMasked) < len(prompts) {
					t.Errorf("%s: counters fast %d masked %d", name, tm.GrammarFast, tm.GrammarMasked)
				}
			}
		}
	}
}

func TestGrammarCacheCompilesOnce(t *testing.T) {
	e := openTest(t, 1)
	a := mustAcquire(t, e, engine.GrammarSpec{GBNF: yesNoGBNF})
	b := mustAcquire(t, e, engine.GrammarSpec{GBNF: yesNoGBNF, Root: "root"})
	c := mustAcquire(t, e, engine.GrammarSpec{GBNF: jsonGBNF})
	if a != b || a == c {
		t.Fatalf("ids %d %d %d: want the same spec to share one", a, b, c)
	}
	if compiles, hits := e.grammars.Counts(); compiles != 2 || hits != 1 {
		t.Fatalf("compiles %d hits %d, want 2 and 1", compiles, hits)
	}
}

func TestBadGrammarsAreRefused(t *testing.T) {
	e := openTest(t, 1)
	bad := map[string]engine.GrammarSpec{
		"empty":              {GBNF: ""},
		"syntax":             {GBNF: `root ::= "unterminated`},
		"undefined rule":     {GBNF: `root ::= foo`},
		"left recursion":     {GBNF: "root ::= root \"a\" | \"a\""},
		"no root":            {GBNF: `start ::= "a"`},
		"unknown start rule": {GBNF: `root ::= "a"`, Root: "nope"},
		"NUL byte":           {GBNF: "root ::= \"a\"\x00 junk"},
		"deep nesting":       {GBNF: "root ::= " + strings.Repeat("(", 5000) + `"a"` + strings.Repeat(")", 5000)},
		"huge repetition":    {GBNF: `root ::= "a"{1,99999}`},
		"ambiguous":          {GBNF: `root ::= ("a"{0,2000}){0,2000}`},
		"ambiguous later":    {GBNF: `root ::= "b" ("a"{0,20}){0,2000}`},
		"lazy, no trigger":   {GBNF: yesNoGBNF, Lazy: true},
		"eager with trigger": {GBNF: yesNoGBNF, TriggerPatterns: []string{"x"}},
		"bad pattern":        {GBNF: yesNoGBNF, Lazy: true, TriggerPatterns: []string{"(unclosed"}},
		"lookahead pattern":  {GBNF: yesNoGBNF, Lazy: true, TriggerPatterns: []string{"a(?=b)"}},
		"huge pattern":       {GBNF: yesNoGBNF, Lazy: true, TriggerPatterns: []string{"((a{100}){100}){100}"}},
		"trigger token":      {GBNF: yesNoGBNF, Lazy: true, TriggerTokens: []engine.Token{1 << 30}},
	}
	for name, g := range bad {
		if _, err := e.AcquireGrammar(&g); !errors.Is(err, engine.ErrGrammar) {
			t.Errorf("%s: %v, want ErrGrammar", name, err)
		}
	}
	// An unknown id in an admission is refused, blaming the lane.
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Grammar: 9999, Sampling: engine.Greedy()}, promptTokens(t, e, 4, "x"), nil)
	p.Prefills = []engine.Prefill{{Lane: 1, Count: 4}}
	if _, err := e.Tick(&p); !errors.Is(err, engine.ErrGrammar) {
		t.Fatalf("unknown grammar: %v", err)
	} else if lane, ok := engine.FaultLane(err); !ok || lane != 1 {
		t.Fatalf("unknown grammar blames %d %v", lane, ok)
	}
}

// A preempted lane resumes with its reply so far at the end of its prompt:
// the grammar walks it and the continuation is the one an uninterrupted
// lane samples (greedy), ending valid; a reply the grammar would not have
// allowed is refused.
func TestGrammarReplayResumes(t *testing.T) {
	e := openTest(t, 2)
	oracle, _ := grammar.ParseGBNF(jsonGBNF)
	gid := mustAcquire(t, e, engine.GrammarSpec{GBNF: jsonGBNF})
	prompt := promptTokens(t, e, 10, "replay")
	full, fin, _ := grammarRun(t, e, [][]engine.Token{prompt}, gid, 0, engine.Greedy(), 200)
	if fin[0] != engine.FinishGrammar || len(full[0]) < 6 {
		t.Fatalf("straight run: %v after %d tokens", fin[0], len(full[0]))
	}
	for _, cut := range []int{1, 3, len(full[0]) - 2} {
		resumed := append(append([]engine.Token(nil), prompt...), full[0][:cut]...)
		rest, fin, _ := grammarRun(t, e, [][]engine.Token{resumed}, gid, uint32(cut), engine.Greedy(), 200)
		got := append(append([]engine.Token(nil), full[0][:cut]...), rest[0]...)
		if text(e, got) != text(e, full[0]) || fin[0] != engine.FinishGrammar {
			t.Errorf("cut %d: resumed to %q (%v), straight %q", cut, text(e, got), fin[0], text(e, full[0]))
		}
		if !oracle.Accepts(text(e, got)) {
			t.Errorf("cut %d: %q does not match", cut, text(e, got))
		}
	}
	// A "reply" that is not the grammar's.
	bogus, err := e.Tokenize("nope", false, false)
	if err != nil {
		t.Fatal(err)
	}
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 7, Seq: 1, Grammar: gid, GrammarReplay: uint32(len(bogus)), Sampling: engine.Greedy()},
		append(append([]engine.Token(nil), prompt...), bogus...), nil)
	p.Prefills = []engine.Prefill{{Lane: 7, Count: uint32(len(prompt) + len(bogus))}}
	e.Free(1)
	if _, err := e.Tick(&p); !errors.Is(err, engine.ErrGrammar) {
		t.Fatalf("a replay the grammar refuses: %v", err)
	}
}

// A lazy grammar leaves the output alone until the trigger, then holds it
// to the grammar from the trigger on.
func TestLazyGrammarStartsAtTrigger(t *testing.T) {
	e := openTest(t, 1)
	prompt := promptTokens(t, e, 10, "lazy")
	free := generate(t, e, [][]engine.Token{prompt}, 8, 64, engine.Greedy())[0]
	if len(free) < 4 {
		t.Fatalf("free run too short: %v", free)
	}
	// The trigger is what the free run writes as its third token.
	trig := e.Detokenize(free[2:3], false)
	if trig == "" {
		t.Skip("third token has no text")
	}
	g := engine.GrammarSpec{
		GBNF:            `root ::= "` + gbnfEscape(trig) + `" ("yes" | "no")`,
		Lazy:            true,
		TriggerPatterns: []string{"(" + regexp.QuoteMeta(trig) + ")"},
	}
	gid := mustAcquire(t, e, g)
	out, fin, _ := grammarRun(t, e, [][]engine.Token{prompt}, gid, 0, engine.Greedy(), 40)
	if fin[0] != engine.FinishGrammar {
		t.Fatalf("finished %v: %q", fin[0], text(e, out[0]))
	}
	before := e.Detokenize(free[:2], false)
	got := text(e, out[0])
	if !strings.HasPrefix(got, before+trig) {
		t.Fatalf("%q does not start with the free run's %q", got, before+trig)
	}
	if tail := got[len(before)+len(trig):]; tail != "yes" && tail != "no" {
		t.Fatalf("after the trigger %q, want yes or no", tail)
	}
	// By token: the trigger token itself starts the grammar.
	gt := engine.GrammarSpec{GBNF: `root ::= "` + gbnfEscape(trig) + `" ("yes" | "no")`, Lazy: true, TriggerTokens: []engine.Token{free[2]}}
	out, fin, _ = grammarRun(t, e, [][]engine.Token{prompt}, mustAcquire(t, e, gt), 0, engine.Greedy(), 40)
	if tail := strings.TrimPrefix(text(e, out[0]), before+trig); fin[0] != engine.FinishGrammar || (tail != "yes" && tail != "no") {
		t.Fatalf("token trigger: %q (%v)", text(e, out[0]), fin[0])
	}
}

func gbnfEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x` + string("0123456789abcdef"[r>>4]) + string("0123456789abcdef"[r&15]))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// A grammar that admits no text the vocabulary can write (a bias bans the
// only token that could continue) ends the lane with ErrGrammar's status,
// not an abort.
func TestGrammarDeadEndFailsTheLane(t *testing.T) {
	e := openTest(t, 1)
	gid := mustAcquire(t, e, engine.GrammarSpec{GBNF: `root ::= "\x01\x02"`})
	ban := []engine.LogitBias{}
	for _, tok := range mustTokenize(t, e, "\x01") {
		ban = append(ban, engine.LogitBias{Token: tok, Bias: float32(math.Inf(-1))})
	}
	var p engine.Plan
	prompt := promptTokens(t, e, 6, "dead")
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, Grammar: gid, Sampling: engine.Greedy()}, prompt, ban)
	p.Prefills = []engine.Prefill{{Lane: 1, Count: uint32(len(prompt))}}
	e.Free(0)
	ev, err := e.Tick(&p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Lanes) != 1 || ev.Lanes[0].Finish != engine.FinishError || ev.Lanes[0].Status != engine.StatusGrammar {
		t.Fatalf("lanes %+v tokens %+v", ev.Lanes, ev.Tokens)
	}
}

func mustTokenize(t *testing.T, e *Engine, s string) []engine.Token {
	t.Helper()
	toks, err := e.Tokenize(s, false, false)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// FuzzGrammarCompile: no grammar text reaches an abort or a crash in
// llama.cpp; whatever compiles can constrain a lane for a few tokens.
func FuzzGrammarCompile(f *testing.F) {
	for _, s := range []string{
		yesNoGBNF, jsonGBNF, `root ::= [^"]*`, `root ::= ("a" | "b")+ "c"?`, `root ::= x{2,5}
x ::= [a-z]`, `root ::= "\u00e9" [\U0001F600-\U0001F64F]`, `root ::= (((("a"))))`, "root ::= a\na ::= b\nb ::= \"c\"",
		`root ::= [`, `root ::= "a" | `, `root ::= ()`, `root ::= [z-a]`, "root ::= \"\\x\"", `root ::= .{0,2000}`,
		`root ::= "a"{2001}`, "root ::= x\nx ::= x \"a\"", `root ::= ("a"{0,2000}){0,2000}`, `root ::= ("a" | "a" | "a")* "b"`, "root ::= x y\nx ::= \"\"?\ny ::= root", `root ::= [^]`,
		// issue 21's shapes: groups past the nesting bound, a chain of rules
		// past the expansion bound (80,000 of them killed the server), empty
		// rules that double a path at each level
		"root ::= " + strings.Repeat("(", 200) + `"a"` + strings.Repeat(")", 200), chainGrammar(9000),
		"root ::= a30 \"x\"\na0 ::= \"\"\n" + doublingRules(30),
	} {
		f.Add(s, "")
	}
	e := openTest(f, 1)
	prompt := promptTokens(f, e, 4, "fuzz")
	f.Fuzz(func(t *testing.T, gbnf, pattern string) {
		g := engine.GrammarSpec{GBNF: gbnf}
		if pattern != "" {
			g.Lazy, g.TriggerPatterns = true, []string{pattern}
		}
		id, err := e.AcquireGrammar(&g)
		if err != nil {
			if !errors.Is(err, engine.ErrGrammar) {
				t.Fatalf("%q: %v, want ErrGrammar", gbnf, err)
			}
			return
		}
		defer e.ReleaseGrammar(id)
		var p engine.Plan
		p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 4, Grammar: id, Sampling: engine.Greedy()}, prompt, nil)
		p.Prefills = []engine.Prefill{{Lane: 1, Count: uint32(len(prompt))}}
		e.Free(0)
		for i := 0; i < 8 && !p.Empty(); i++ {
			ev, err := e.Tick(&p)
			if err != nil {
				t.Fatalf("%q: tick: %v", gbnf, err)
			}
			p.Reset()
			for _, le := range ev.Lanes {
				if le.Finish != engine.FinishNone {
					p.Retires = append(p.Retires, le.Lane)
				} else {
					p.Decodes = append(p.Decodes, engine.Decode{Lane: le.Lane})
				}
			}
		}
		if !p.Empty() {
			e.Tick(&engine.Plan{Retires: []uint32{1}})
		}
	})
}

// A grammar whose parses multiply as the output grows (every split of a
// run of a's into groups is one) ends its lane with the grammar status
// once they pass the engine's bound, instead of slowing every tick. A
// current upstream llama.cpp refuses this grammar already at parse time (its
// repetition bound), which is an ErrGrammar before any lane runs.
func TestAmbiguousGrammarEndsTheLane(t *testing.T) {
	e := openTest(t, 1)
	spec := engine.GrammarSpec{GBNF: `root ::= "b" ("a"{1,2000}){0,2000}`}
	if upstreamLlama {
		if id, err := e.AcquireGrammar(&spec); err == nil {
			e.ReleaseGrammar(id)
			t.Fatal("upstream llama.cpp accepted the nested 2000x2000 repetition")
		} else if !errors.Is(err, engine.ErrGrammar) {
			t.Fatalf("acquire: %v, want ErrGrammar", err)
		}
		return
	}
	gid := mustAcquire(t, e, spec)
	prompt := promptTokens(t, e, 6, "ambiguous")
	var noEnd []engine.LogitBias // the model must keep writing a's
	for _, t := range e.Descriptor().EOG {
		noEnd = append(noEnd, engine.LogitBias{Token: t, Bias: float32(math.Inf(-1))})
	}
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: 2000, Grammar: gid, Sampling: engine.Greedy()}, prompt, noEnd)
	p.Prefills = []engine.Prefill{{Lane: 1, Count: uint32(len(prompt))}}
	e.Free(0)
	for range 200 {
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Lanes) != 1 {
			t.Fatalf("lanes %+v", ev.Lanes)
		}
		if le := ev.Lanes[0]; le.Finish != engine.FinishNone {
			if le.Finish != engine.FinishError || le.Status != engine.StatusGrammar {
				t.Fatalf("ended %v (%v), want the grammar status", le.Finish, le.Status)
			}
			return
		}
		p.Reset()
		p.Decodes = []engine.Decode{{Lane: 1}}
	}
	t.Fatal("the lane never hit the bound")
}

// chainGrammar is root followed by a chain of n rules, the last empty.
func chainGrammar(n int) string {
	var b strings.Builder
	b.WriteString("root ::= r0 \"x\"\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "r%d ::= r%d\n", i, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"\"\n", n)
	return b.String()
}

// doublingRules is a1 … an, each two of the one before.
func doublingRules(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "a%d ::= a%d a%d\n", i, i-1, i-1)
	}
	return b.String()
}
