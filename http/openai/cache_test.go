package openai

import (
	"encoding/json"
	"testing"

	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// /v1/completions with a suffix is a FIM route: a greedy whole request
// with one plain choice has a completion-cache key, what changes the
// answer changes the key, and what the cache cannot give back has none.
func TestCompletionsSuffixCacheKey(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	key := func(body string) string {
		var req oaiCompletionRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		plan, err := planCompletions(m, &req, sched.Chat)
		if err != nil {
			t.Fatal(err)
		}
		return plan.cacheKey(m)
	}
	const head = `{"model":"fake","prompt":"def f():","suffix":"\n","temperature":0,"max_tokens":8`
	base := key(head + `}`)
	if base == "" {
		t.Fatal("a greedy suffix request has no cache key")
	}
	if key(head+`,"seed":5}`) != base {
		t.Error("the seed changed a greedy key")
	}
	for _, body := range []string{head + `,"max_tokens":9}`, head + `,"frequency_penalty":0.5}`, head + `,"stop":["x"]}`} {
		if k := key(body); k == "" || k == base {
			t.Errorf("%s: key %q", body, k)
		}
	}
	for _, body := range []string{
		`{"model":"fake","prompt":"def f():","suffix":"\n","max_tokens":8}`, // not greedy
		head + `,"logprobs":1}`,
		head + `,"n":2}`,
		head + `,"echo":true}`,
		`{"model":"fake","prompt":"def f():","temperature":0,"max_tokens":8}`, // no suffix: not FIM
	} {
		if k := key(body); k != "" {
			t.Errorf("%s: key %q, want none", body, k)
		}
	}
}

// A cached answer is served without reaching the scheduler (the fake
// model's refuses every request), with the whole prompt counted cached.
func TestCompletionsSuffixServedFromCache(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	a := testAPI(8)
	body := `{"model":"fake","prompt":"def f():","suffix":"\n","temperature":0,"max_tokens":8}`
	var req oaiCompletionRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	plan, err := planCompletions(m, &req, sched.Chat)
	if err != nil {
		t.Fatal(err)
	}
	a.host.CompletionCache().Put(task.Cached{Key: plan.cacheKey(m), Text: "  return 1", Tokens: 3, Finish: "stop"})
	ctx := tasktest.RequestCtx([]byte(body))
	if err := a.completions(ctx, m); err != nil {
		t.Fatalf("a cached request reached the scheduler: %v", err)
	}
	var got oaiCompletion
	if err := json.Unmarshal(ctx.Response.Body(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Text != "  return 1" || *got.Choices[0].FinishReason != "stop" {
		t.Fatalf("choices %+v", got.Choices)
	}
	u := got.Usage
	if u == nil || u.CompletionTokens != 3 || u.PromptTokens == 0 || u.PromptTokensDetails.CachedTokens != u.PromptTokens {
		t.Fatalf("usage %+v", u)
	}
}
