package openai

import (
	"slices"
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task/tasktest"
)

// A vocabulary without FIM tokens gets task.FIMPrompt's 501 from
// /v1/completions with a suffix, as from /infill.
func TestCompletionsWithoutFIMTokens(t *testing.T) {
	m := tasktest.FakeModel(t, false)
	req := decodeCompletions(t, `{"prompt":"a","suffix":"b"}`)
	if _, err := planCompletions(m, req, sched.Chat); wire.AsError(err).Status != 501 {
		t.Fatalf("/v1/completions: %v", err)
	}
}

// Choices are indexed prompt by prompt, n per prompt, each with its own
// seed; echo and best_of follow the documented rules.
func TestPlanCompletions(t *testing.T) {
	m := tasktest.FakeModel(t, true)
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

// Fuzz target for the completions request decoder: any body goes through
// decode, checks and prompt building over the fake vocabulary without a
// panic, and what is accepted is consistent. Run with
// go test -fuzz=FuzzOpenAICompletionRequest -fuzztime=30s ./http/openai/.
func FuzzOpenAICompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"fake","prompt":"Hello","max_tokens":8,"temperature":0}`,
		`{"prompt":["a","b"],"n":2,"logprobs":3,"stop":"\n","seed":3,"logit_bias":{"65":-100}}`,
		`{"prompt":[[1,2],[3]],"echo":true,"max_tokens":0,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"def f(","suffix":"\n    return 1\n","max_tokens":16,"best_of":1}`,
		`{"prompt":"x","best_of":3}`, `{"prompt":7}`, `{"prompt":"x","n":0}`,
		`{"prompt":"x","temperature":1e-40,"logprobs":6,"n":1e30,"best_of":1e30,"max_tokens":1e30}`,
		`{"prompt":"x","logit_bias":` + tasktest.BanAllObject(tasktest.FakeVocab, "-100") + `}`,
		`{"prompt":"x","suffix":"y","grammar":"root ::= x","mirostat":1}`,
		`{"prompt":["x","` + strings.Repeat("x", 16*512+1) + `"]}`,
	} {
		f.Add([]byte(s))
	}
	m := tasktest.FakeModel(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req oaiCompletionRequest
		if wire.DecodeBody(body, &req) != nil {
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
			tasktest.CheckAccepted(t, m, c.spec)
		}
	})
}

func decodeCompletions(t testing.TB, body string) *oaiCompletionRequest {
	t.Helper()
	var req oaiCompletionRequest
	if err := wire.DecodeBody([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// A prompt object's images are refused by name on /v1/completions, never
// dropped (their markers would reach the model as text); an empty
// multimodal_data asks for nothing.
func TestCompletionsRefusePromptImages(t *testing.T) {
	m := tasktest.FakeModel(t, true)
	_, err := planCompletions(m, decodeCompletions(t, `{"prompt":{"prompt_string":"a <__media__> b","multimodal_data":["aGk="]}}`), sched.Chat)
	if e := wire.AsError(err); e == nil || e.Status != 400 || e.Param != "prompt.multimodal_data" || !strings.Contains(e.Msg, "/v1/completions takes no images") {
		t.Errorf("a prompt object with images: %v", err)
	}
	if _, err := planCompletions(m, decodeCompletions(t, `{"prompt":{"prompt_string":"a b","multimodal_data":[]}}`), sched.Chat); err != nil {
		t.Errorf("an empty multimodal_data: %v", err)
	}
}
