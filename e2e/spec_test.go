package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"superfluid/app"
	"superfluid/sched"
)

// specCompletion is what the speculation tests read of a /completion.
type specCompletion struct {
	Content      string `json:"content"`
	TokensCached int    `json:"tokens_cached"`
	Probs        []struct {
		ID          int     `json:"id"`
		Logprob     float64 `json:"logprob"`
		TopLogprobs []struct {
			ID      int     `json:"id"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"completion_probabilities"`
	Timings struct {
		DraftN         *int `json:"draft_n"`
		DraftNAccepted *int `json:"draft_n_accepted"`
	} `json:"timings"`
}

// specMetric reads one sample of the server's /metrics.
func specMetric(t *testing.T, st *app.Stack, sample string) int {
	t.Helper()
	resp, err := http.Get(st.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\d+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no %s in /metrics:\n%s", sample, raw)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// Through the real server, several lanes at once: greedy completions with
// n-gram drafts are those without, with stop strings, logprobs and a
// grammar; the drafts are counted per request and on /metrics; and a
// follow-up turn on a sequence that drafts were cut back from continues
// from the cache exactly as without. As many requests as lanes, so none
// waits for another's cached prefix: which request finds a warm prefix,
// and which lanes share a step, changes the logits' rounding (llama.cpp
// is not batch-invariant), which on this random-weight model's near-ties
// changes a token now and then with or without drafts (a sampled request
// did, between two plain runs). Sampled lanes are held to their plain
// tokens in cgo's TestDraftsGiveThePlainTokens, one composition each.
func TestSpeculationGivesThePlainCompletions(t *testing.T) {
	plainStack := startStack(t, app.Options{Lanes: 4})
	specStack := startStack(t, app.Options{Lanes: 4, Sched: sched.Config{Speculation: sched.Speculation{Type: sched.SpecNgramSimple, DraftMax: 5, Ungated: true}}})
	text := strings.Repeat("the cat sat on the mat and the dog sat on the log. ", 6)
	bodies := []string{
		jsonBody(map[string]any{"prompt": text, "n_predict": 48, "temperature": 0, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": "Notes: " + text, "n_predict": 40, "temperature": 0, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": text + "cat", "n_predict": 48, "temperature": 0, "stop": []string{"dog"}, "n_probs": 2}),
		jsonBody(map[string]any{"prompt": text, "n_predict": 40, "temperature": 0, "grammar": `root ::= ("cat" | " sat" | " the" | " mat" | ".")+`, "n_probs": 2}),
	}
	run := func(st *app.Stack) []specCompletion {
		out := make([]specCompletion, len(bodies))
		var wg sync.WaitGroup
		for i, b := range bodies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = llamaDo[specCompletion](t, st, "/completion", b)
			}()
		}
		wg.Wait()
		return out
	}
	plain, spec := run(plainStack), run(specStack)
	drafted, accepted := 0, 0
	for i := range bodies {
		if j, ok := sameUpToATie(spec[i], plain[i]); !ok {
			t.Fatalf("request %d differs at token %d, not at a near-tie:\nwith drafts %q\nwithout %q", i, j, spec[i].Content, plain[i].Content)
		} else if j >= 0 {
			t.Logf("request %d: the runs part at token %d, a near-tie of the plain run's top two", i, j)
		}
		if plain[i].Timings.DraftN != nil {
			t.Fatalf("request %d reports drafts without speculation", i)
		}
		if d := spec[i].Timings; d.DraftN != nil {
			if d.DraftNAccepted == nil || *d.DraftNAccepted > *d.DraftN {
				t.Fatalf("request %d: draft timings %v %v", i, *d.DraftN, d.DraftNAccepted)
			}
			drafted += *d.DraftN
			accepted += *d.DraftNAccepted
		}
	}
	src := fmt.Sprintf("{source=%q}", sched.SpecNgramSimple)
	if accepted == 0 || specMetric(t, specStack, "superfluid_draft_accepted_tokens_total"+src) != accepted ||
		specMetric(t, specStack, "superfluid_draft_tokens_total"+src) != drafted {
		t.Fatalf("%d of %d draft tokens accepted; /metrics disagrees or none landed", accepted, drafted)
	}
	t.Logf("%d of %d draft tokens accepted over %d requests", accepted, drafted, len(bodies))
	// The next turn of the first conversation starts from its cached
	// sequence, cut back after every rejected draft.
	next := jsonBody(map[string]any{"prompt": text + plain[0].Content + " and then", "n_predict": 24, "temperature": 0, "n_probs": 2})
	a := llamaDo[specCompletion](t, plainStack, "/completion", next)
	b := llamaDo[specCompletion](t, specStack, "/completion", next)
	j, ok := sameUpToATie(b, a)
	if !ok || b.TokensCached == 0 {
		t.Fatalf("follow-up differs at token %d: with drafts %q (%d cached)\nwithout %q", j, b.Content, b.TokensCached, a.Content)
	}
	if j >= 0 {
		t.Logf("follow-up: the runs part at token %d, a near-tie", j)
	}
}

// nearTie is how close the plain run's two most likely tokens may be for
// a changed token to be rounding rather than a wrong accept: the same
// token's logprob differs by up to ~0.002 between batch compositions here.
const nearTie = 0.02

// sameUpToATie compares two greedy completions token by token (their
// n_probs): -1 and true when they agree throughout, logprobs within
// rounding; else the first token that differs, and whether the plain
// run's top two were a near-tie there (after which the runs may go their
// own ways).
func sameUpToATie(spec, plain specCompletion) (int, bool) {
	for j := range min(len(spec.Probs), len(plain.Probs)) {
		a, b := spec.Probs[j], plain.Probs[j]
		if a.ID == b.ID {
			if abs(a.Logprob-b.Logprob) > nearTie {
				return j, false
			}
			continue
		}
		top := b.TopLogprobs
		return j, len(top) >= 2 && top[0].Logprob-top[1].Logprob <= nearTie
	}
	if len(spec.Probs) != len(plain.Probs) || spec.Content != plain.Content {
		return len(spec.Probs), false
	}
	return -1, true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
