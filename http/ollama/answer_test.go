package ollama

import (
	"encoding/json"
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// A greedy /api/generate with a suffix is answered from the completion
// cache without reaching the scheduler (the test model's refuses every
// request), reporting the cached text, finish and count but no work; the
// same request sampled, or with logprobs, is not a cache hit and reaches
// the scheduler.
func TestGenerateSuffixServedFromCache(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	a := testAPI()
	const head = `{"model":"tiny","prompt":"def f(","suffix":"\n","stream":false`
	greedy := head + `,"options":{"temperature":0,"num_predict":8}}`
	ctx := tasktest.RequestCtx([]byte(greedy))
	var req generateRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		t.Fatal(err)
	}
	j, err := a.generateJob(ctx, m, &req)
	if err != nil {
		t.Fatal(err)
	}
	key := task.CacheKey(j.model, &j.req.Spec, cacheTag)
	if key == "" {
		t.Fatal("a greedy FIM request has no cache key")
	}
	a.host.CompletionCache().Put(task.Cached{Key: key, Text: "x):", Tokens: 3, Finish: "stop"})
	if err := a.generate(ctx, m); err != nil {
		t.Fatalf("a cached request reached the scheduler: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(ctx.Response.Body(), &got); err != nil {
		t.Fatal(err)
	}
	if got["response"] != "x):" || got["done"] != true || got["done_reason"] != "stop" || got["eval_count"] != 3.0 ||
		got["eval_duration"] != nil || got["context"] != nil {
		t.Errorf("cached answer %s", ctx.Response.Body())
	}
	for _, body := range []string{
		head + `,"options":{"temperature":0.5,"num_predict":8}}`,
		head + `,"logprobs":true,"options":{"temperature":0,"num_predict":8}}`,
	} {
		err := a.generate(tasktest.RequestCtx([]byte(body)), m)
		if err == nil || !strings.Contains(err.Error(), "no scheduler") {
			t.Errorf("%s: %v, want the scheduler's refusal", body, err)
		}
	}
}
