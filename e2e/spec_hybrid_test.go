package e2e

import (
	"fmt"
	"strings"
	"testing"

	"superfluid/app"
	"superfluid/cgo"
	"superfluid/sched"
)

// A hybrid model (qwen35: attention and gated delta-net layers) served with
// n-gram drafts: greedy completions over a prompt's own words are
// those without drafts, drafts are proposed and accepted (each rejected
// one rolled back out of the recurrent state) and counted on /metrics,
// and the next turn, which starts from the cached sequence the last
// rollback was left pending on, continues as without drafts. Every answer
// is a 200 (llamaDo fails on anything else).
func TestHybridSpeculationGivesThePlainCompletions(t *testing.T) {
	if cgo.LlamaSource() != "upstream source tree" {
		t.Skip("qwen35 and recurrent-state rollback need the upstream llama.cpp")
	}
	path := archModelFile(t, "qwen35")
	plainStack := startStack(t, app.Options{ModelPath: path, Lanes: 2})
	specStack := startStack(t, app.Options{ModelPath: path, Lanes: 2, Sched: sched.Config{Speculation: sched.Speculation{Type: sched.SpecNgramSimple, DraftMax: 4, Ungated: true}}})
	text := strings.Repeat("the cat sat on the mat and the dog sat on the log. ", 6)
	// Random weights never repeat on their own: a grammar of the prompt's
	// words makes the output a walk over them, which n-gram lookup drafts.
	const words = `root ::= ("cat" | " sat" | " the" | " mat" | " on" | ".")+`
	bodies := []string{
		jsonBody(map[string]any{"prompt": text, "n_predict": 48, "temperature": 0, "grammar": words, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": "Notes: " + text, "n_predict": 40, "temperature": 0, "grammar": words, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": text + "cat", "n_predict": 48, "temperature": 0, "grammar": words, "stop": []string{"mat."}, "n_probs": 2}),
	}
	drafted, accepted := 0, 0
	var first specCompletion
	for i, b := range bodies {
		plain := llamaDo[specCompletion](t, plainStack, "/completion", b)
		spec := llamaDo[specCompletion](t, specStack, "/completion", b)
		if j, ok := sameUpToATie(spec, plain); !ok {
			t.Fatalf("request %d differs at token %d, not at a near-tie:\nwith drafts %q\nwithout %q", i, j, spec.Content, plain.Content)
		} else if j >= 0 {
			t.Logf("request %d: the runs part at token %d, a near-tie of the plain run's top two", i, j)
		}
		if d := spec.Timings; d.DraftN != nil && d.DraftNAccepted != nil {
			drafted += *d.DraftN
			accepted += *d.DraftNAccepted
		}
		if i == 0 {
			first = plain
		}
	}
	src := fmt.Sprintf("{source=%q}", sched.SpecNgramSimple)
	if accepted == 0 || accepted >= drafted || specMetric(t, specStack, "superfluid_draft_accepted_tokens_total"+src) != accepted ||
		specMetric(t, specStack, "superfluid_draft_tokens_total"+src) != drafted {
		t.Fatalf("%d of %d draft tokens accepted; /metrics disagrees, or none landed, or none was rolled back", accepted, drafted)
	}
	t.Logf("%d of %d draft tokens accepted over %d requests", accepted, drafted, len(bodies))
	next := jsonBody(map[string]any{"prompt": text + first.Content + " and then", "n_predict": 24, "temperature": 0, "grammar": words, "n_probs": 2})
	a := llamaDo[specCompletion](t, plainStack, "/completion", next)
	b := llamaDo[specCompletion](t, specStack, "/completion", next)
	if j, ok := sameUpToATie(b, a); !ok || b.TokensCached == 0 {
		t.Fatalf("follow-up differs at token %d: with drafts %q (%d cached)\nwithout %q", j, b.Content, b.TokensCached, a.Content)
	}
}

// Qwen3.5's own multi-token prediction block drafts through the server
// (--spec-type draft-mtp on the hybrid): completions equal those without
// drafts, the block's drafts (random weights: never accepted) are verified,
// rolled back out of the recurrent state and counted on /metrics.
func TestHybridMTPGivesThePlainCompletions(t *testing.T) {
	if cgo.LlamaSource() != "upstream source tree" {
		t.Skip("qwen35 and multi-token prediction need the upstream llama.cpp")
	}
	path := archModelFile(t, "qwen35mtp")
	plainStack := startStack(t, app.Options{ModelPath: path, Lanes: 2})
	mtpStack := startStack(t, app.Options{ModelPath: path, Lanes: 2, Sched: sched.Config{Speculation: sched.Speculation{Type: sched.SpecDraftMTP, DraftMax: 3, Ungated: true}}})
	text := strings.Repeat("the cat sat on the mat and the dog sat on the log. ", 3)
	drafted := 0
	for i, b := range []string{
		jsonBody(map[string]any{"prompt": text, "n_predict": 32, "temperature": 0, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": "Notes: " + text, "n_predict": 24, "temperature": 0, "stop": []string{"dog"}, "n_probs": 2}),
	} {
		plain := llamaDo[specCompletion](t, plainStack, "/completion", b)
		got := llamaDo[specCompletion](t, mtpStack, "/completion", b)
		if j, ok := sameUpToATie(got, plain); !ok {
			t.Fatalf("request %d differs at token %d, not at a near-tie:\nwith drafts %q\nwithout %q", i, j, got.Content, plain.Content)
		}
		if got.Timings.DraftN != nil {
			drafted += *got.Timings.DraftN
		}
	}
	src := fmt.Sprintf("{source=%q}", sched.SpecDraftMTP)
	if drafted == 0 || specMetric(t, mtpStack, "superfluid_draft_tokens_total"+src) != drafted {
		t.Fatalf("%d draft tokens; /metrics disagrees or the block drafted none", drafted)
	}
}
