package http

import (
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// Fuzz targets for the completions request decoder: any
// body goes through decode, checks and prompt building over the fake
// vocabulary without a panic, and what is accepted is consistent (prompts
// fit the context, token ids are in the vocabulary). Run each with
// go test -fuzz=Name -fuzztime=30s ./http/.

// checkJob holds what the server relies on for a job it would submit.
func checkJob(t *testing.T, m *Model, g *task.Spec) {
	if len(g.Prompt) == 0 || len(g.Prompt) >= m.Desc.Ctx {
		t.Fatalf("accepted a prompt of %d tokens in a context of %d", len(g.Prompt), m.Desc.Ctx)
	}
	for _, tok := range g.Prompt {
		if tok < 0 || int(tok) >= m.Desc.Vocab {
			t.Fatalf("accepted token %d", tok)
		}
	}
	if g.MaxTokens < 0 || g.Logprobs < 0 || g.Logprobs > 20 {
		t.Fatalf("accepted limits %+v", g)
	}
	if msg := unschedulable(m.Desc, &sched.Request{Prompt: g.Prompt, Class: g.Class, MaxTokens: g.MaxTokens, Sampling: g.Sampling, Logprobs: g.Logprobs, Bias: g.Bias}); msg != "" {
		t.Fatalf("accepted what the scheduler refuses (%s): %+v", msg, g)
	}
}

func FuzzOpenAICompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"fake","prompt":"Hello","max_tokens":8,"temperature":0}`,
		`{"prompt":["a","b"],"n":2,"logprobs":3,"stop":"\n","seed":3,"logit_bias":{"65":-100}}`,
		`{"prompt":[[1,2],[3]],"echo":true,"max_tokens":0,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"def f(","suffix":"\n    return 1\n","max_tokens":16,"best_of":1}`,
		`{"prompt":"x","best_of":3}`, `{"prompt":7}`, `{"prompt":"x","n":0}`,
		`{"prompt":"x","temperature":1e-40,"logprobs":6,"n":1e30,"best_of":1e30,"max_tokens":1e30}`,
		`{"prompt":"x","logit_bias":` + banAllObject("-100") + `}`,
		`{"prompt":"x","suffix":"y","grammar":"root ::= x","mirostat":1}`,
		`{"prompt":["x","` + strings.Repeat("x", 16*512+1) + `"]}`,
	} {
		f.Add([]byte(s))
	}
	m := fakeModel(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req oaiCompletionRequest
		if decodeBody(body, &req) != nil {
			return
		}
		plan, err := planCompletions(m, &req, sched.Chat)
		if err != nil {
			wire.AsError(err)
			return
		}
		for i, c := range plan.choices {
			if c.index != i {
				t.Fatalf("choice %d has index %d", i, c.index)
			}
			checkJob(t, m, c.spec)
		}
	})
}
