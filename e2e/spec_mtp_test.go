//go:build !sfmodule

package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"superfluid/app"
	"superfluid/sched"
	"superfluid/synth"
)

// (The Go module's llama.cpp runs no multi-token prediction: these tests
// are the current engine's.)

// mtpModelFile writes (once) a tiny synthetic GLM-4.5 (glm4moe) with its
// multi-token prediction block.
func mtpModelFile(t testing.TB) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	const key = "mtp|glm4moe"
	if p, ok := modelMemo[key]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "glm4moe-mtp.gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: "f16", Seed: 5, Arch: "glm4moe"}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// Through the real server, four lanes at once, greedy completions with
// the model's own multi-token prediction drafts are those without (up to
// a near-tie's rounding): with logprobs, a stop string, a grammar, and two
// choices of one OpenAI request (n = 2); the block drafts for every
// request, and /metrics counts its drafts under draft-mtp.
func TestMTPGivesThePlainCompletions(t *testing.T) {
	model := mtpModelFile(t)
	plainStack := startStack(t, app.Options{ModelPath: model, Lanes: 4})
	mtpStack := startStack(t, app.Options{ModelPath: model, Lanes: 4, Sched: sched.Config{Speculation: sched.Speculation{
		Type: sched.SpecDraftMTP, DraftMax: 3, Ungated: true}}})
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
	plain, got := run(plainStack), run(mtpStack)
	drafted, accepted := 0, 0
	for i := range bodies {
		if j, ok := sameUpToATie(got[i], plain[i]); !ok {
			t.Fatalf("request %d differs at token %d, not at a near-tie:\nwith drafts %q\nwithout %q", i, j, got[i].Content, plain[i].Content)
		} else if j >= 0 {
			t.Logf("request %d: the runs part at token %d, a near-tie", i, j)
		}
		d := got[i].Timings
		if d.DraftN == nil || *d.DraftN == 0 || d.DraftNAccepted == nil {
			t.Fatalf("request %d: no drafts (%v)", i, d.DraftN)
		}
		drafted += *d.DraftN
		accepted += *d.DraftNAccepted
	}
	t.Logf("%d of %d draft tokens accepted", accepted, drafted)
	if specMetric(t, mtpStack, `superfluid_draft_tokens_total{source="draft-mtp"}`) != drafted ||
		specMetric(t, mtpStack, `superfluid_draft_accepted_tokens_total{source="draft-mtp"}`) != accepted {
		t.Fatalf("/metrics disagrees with the requests' %d drafted, %d accepted", drafted, accepted)
	}

	// Two choices of one request: each as the same request alone without
	// drafts gives it.
	choices := func(st *app.Stack, n int) []string {
		status, raw := llamaPost(t, st.URL()+"/v1/completions", jsonBody(map[string]any{"prompt": text, "n": n, "max_tokens": 16, "temperature": 0}))
		var body struct{ Choices []struct{ Text string } }
		if status != 200 || json.Unmarshal(raw, &body) != nil || len(body.Choices) != n {
			t.Fatalf("n = %d: %d %s", n, status, raw)
		}
		out := make([]string, n)
		for i, c := range body.Choices {
			out[i] = c.Text
		}
		return out
	}
	alone := choices(plainStack, 1)[0]
	for i, c := range choices(mtpStack, 2) {
		if c != alone {
			t.Errorf("choice %d with drafts %q, alone without %q", i, c, alone)
		}
	}
}

// --spec-type draft-mtp on a model without multi-token prediction layers
// is refused at start, naming the flag.
func TestMTPRefusedOnAModelWithoutItsLayers(t *testing.T) {
	_, err := app.Start("127.0.0.1:0", app.Options{ModelPath: tinyModel(t), Lanes: 2, Threads: 1, Ctx: 1024,
		Sched: sched.Config{Speculation: sched.Speculation{Type: sched.SpecDraftMTP}}})
	if err == nil || !strings.Contains(err.Error(), "--spec-type draft-mtp") || !strings.Contains(err.Error(), "multi-token prediction") {
		t.Fatalf("draft-mtp on a llama model: %v", err)
	}
}
