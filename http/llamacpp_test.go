package http

import (
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
)

// A vocabulary without FIM tokens gets fimPrompt's 501 from
// /v1/completions with a suffix (as from /infill: package llamacpp's
// test).
func TestCompletionsSuffixWithoutFIMTokens(t *testing.T) {
	m := fakeModel(t, false)
	req := decodeCompletions(t, `{"prompt":"a","suffix":"b"}`)
	if _, err := planCompletions(m, req, sched.Chat); wire.AsError(err).Status != 501 {
		t.Fatalf("/v1/completions: %v", err)
	}
}

// Choices are indexed prompt by prompt, n per prompt, each with its own
// seed; echo and best_of follow the documented rules.
func TestPlanCompletions(t *testing.T) {
	m := fakeModel(t, true)
	plan, err := planCompletions(m, decodeCompletions(t, `{"prompt":["ab",[1,2,3]],"n":2,"seed":7,"echo":true,"max_tokens":3}`), sched.Chat)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.choices) != 4 || !slices.Equal(plan.promptLens, []int{3, 3}) {
		t.Fatalf("%d choices, prompts %v", len(plan.choices), plan.promptLens)
	}
	for i, c := range plan.choices {
		if c.index != i || c.prompt != i/2 || c.spec.Sampling.Seed != 7+uint64(i%2) || c.spec.MaxTokens != 3 {
			t.Errorf("choice %d: index %d prompt %d seed %d max %d", i, c.index, c.prompt, c.spec.Sampling.Seed, c.spec.MaxTokens)
		}
	}
	if plan.choices[0].echo != "ab" || plan.choices[2].echo != "\x01\x02\x03" {
		t.Errorf("echo %q %q", plan.choices[0].echo, plan.choices[2].echo)
	}
	plan, err = planCompletions(m, decodeCompletions(t, `{"prompt":"ab"}`), sched.Chat)
	if err != nil || plan.choices[0].spec.MaxTokens != 16 {
		t.Fatalf("default max_tokens: %v", err)
	}
	plan, err = planCompletions(m, decodeCompletions(t, `{"prompt":"ab","suffix":"cd"}`), sched.Chat)
	if err != nil || plan.choices[0].spec.Class != sched.FIM || len(plan.choices[0].spec.StopTokens) == 0 {
		t.Fatalf("suffix: %v", err)
	}
	for _, bad := range []string{
		`{"prompt":"a","best_of":2}`, `{"prompt":"a","n":2,"best_of":1}`, `{"prompt":"a","echo":true,"logprobs":1}`,
		`{"prompt":[1,2],"suffix":"x"}`, `{"prompt":"a","logprobs":21}`, `{"prompt":"a","max_tokens":-5}`,
		`{"prompt":"` + strings.Repeat("x", 600) + `"}`,
	} {
		if _, err := planCompletions(m, decodeCompletions(t, bad), sched.Chat); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func decodeCompletions(t testing.TB, body string) *oaiCompletionRequest {
	t.Helper()
	var req oaiCompletionRequest
	if err := decodeBody([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// decodeBody runs wire.DecodeJSON, the server's request decoder, over body.
func decodeBody(body []byte, v any) error {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetBody(body)
	return wire.DecodeJSON(&ctx, v)
}
