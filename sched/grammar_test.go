package sched

import (
	"context"
	"errors"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

func TestSubmitCompilesTheGrammar(t *testing.T) {
	eng := enginetest.New(2, 64, 8, 4096, nil)
	s, err := New(eng, newFakeCache(t, eng), Config{})
	if err != nil {
		t.Fatal(err)
	}
	bad := Request{Prompt: promptOf(1, 8), Grammar: &engine.GrammarSpec{GBNF: `root ::= "unterminated`}}
	if _, err := s.Submit(context.Background(), bad); !errors.Is(err, engine.ErrGrammar) {
		t.Fatalf("a grammar that does not parse: %v, want ErrGrammar", err)
	}
	good := Request{Prompt: promptOf(1, 8), Grammar: &engine.GrammarSpec{GBNF: `root ::= "a"`}}
	if _, err := s.Submit(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	if n := eng.GrammarCache().Idle(); n != 0 {
		t.Fatalf("%d idle grammars while a job holds its grammar", n)
	}
	// The scheduler closes with the job queued: the job fails and lets go.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx)
	if n := eng.GrammarCache().Idle(); n != 1 {
		t.Fatalf("%d idle grammars after the job ended, want 1", n)
	}
}

// A preempted grammar lane resumes with its output so far replayed into
// the grammar: every re-admission names the grammar and counts the tokens
// generated before it, and the job lets go of the grammar once it ends.
func TestPreemptedGrammarLaneReplaysItsOutput(t *testing.T) {
	h := newHarness(t, 1, 4096, Config{})
	h.eng.KeepPlans = true
	gid, err := h.eng.AcquireGrammar(&engine.GrammarSpec{GBNF: `root ::= [a-z]*`})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Prompt: promptOf(7, 300), Class: Background, MaxTokens: 600}
	j := h.submit("bg", req)
	j.grammar = gid
	chats := 0
	for range 5000 {
		if h.done("bg") {
			break
		}
		if l := h.loop.p.laneOf(j); l != nil && l.produced > 0 && chats < 3 {
			chats++
			h.submit(string(rune('a'+chats)), Request{Prompt: promptOf(100+chats, 20), Class: Chat, MaxTokens: 5})
		}
		h.step()
	}
	h.run(1000)
	if r := h.result("bg"); r.Preemptions != 3 {
		t.Fatalf("preempted %d times, want 3", r.Preemptions)
	}
	h.expectOutput("bg", req)
	admits := 0
	for _, p := range h.eng.Plans {
		for _, a := range p.Admits {
			if a.PromptLen < 300 {
				if a.Grammar != 0 || a.GrammarReplay != 0 {
					t.Errorf("a chat admitted with grammar %d replay %d", a.Grammar, a.GrammarReplay)
				}
				continue
			}
			admits++
			if a.Grammar != gid || a.GrammarReplay != a.PromptLen-300 {
				t.Errorf("admit of %d tokens: grammar %d replay %d, want %d and %d", a.PromptLen, a.Grammar, a.GrammarReplay, gid, a.PromptLen-300)
			}
		}
	}
	if admits != 4 {
		t.Fatalf("%d admissions of the grammar job, want 4", admits)
	}
	if got := h.stats.Snapshot().GrammarFastTokens; got != 600 {
		t.Fatalf("%d grammar tokens counted, want 600", got)
	}
	if h.eng.GrammarCache().Idle() != 1 || j.grammar != 0 {
		t.Fatalf("the ended job still holds its grammar")
	}
}
