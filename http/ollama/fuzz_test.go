package ollama

import (
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

var ollamaGenerateSeeds = []string{
	`{"model":"tiny","prompt":"hello"}`,
	`{"model":"tiny:latest","prompt":"hello","system":"be brief","stream":false,"options":{"temperature":0,"num_predict":8,"stop":["\n"]}}`,
	`{"model":"tiny","prompt":"<|im_start|>user\nhi<|im_end|>\n","raw":true,"options":{"seed":-1,"top_k":0,"top_p":1,"min_p":0.05}}`,
	`{"model":"tiny","prompt":"def f(","suffix":"\n  return 1\n","options":{"num_predict":16,"num_ctx":64,"temperature":0}}`,
	`{"model":"tiny","prompt":"","suffix":"x"}`,
	`{"model":"tiny","keep_alive":0}`,
	`{"model":"tiny","prompt":"again","context":[1,2,3],"options":{"repeat_penalty":1.1,"repeat_last_n":-1}}`,
	`{"model":"tiny","prompt":"hi","logprobs":true,"top_logprobs":3,"options":{"num_ctx":10}}`,
	`{"model":"tiny","prompt":"hi","format":"json","images":["aGk="]}`,
	`{"model":"tiny","prompt":"hi","options":{"temperature":"hot","num_predict":1e30,"mirostat":2}}`,
	`{"model":"tiny","prompt":"hi","think":"high","keep_alive":"5m"}`,
	// Poison values: each is normalized or refused before the scheduler.
	`{"model":"tiny","prompt":"hi","options":{"temperature":1e-40,"top_p":1e-50,"repeat_penalty":1e-40}}`,
	`{"model":"tiny","prompt":"hi","options":{"temperature":1e400,"seed":1e30,"num_predict":1e15,"repeat_last_n":1e15}}`,
	`{"model":"tiny","prompt":"hi","top_logprobs":1e30,"options":{"typical_p":0.5,"num_ctx":1e30}}`,
	`{"model":"tiny","prompt":"` + strings.Repeat("x", 16*128+1) + `","raw":true}`,
}

// Decoding and validating any /api/generate body never panics: it is
// refused with a client error, or it becomes a load answer or a spec the
// scheduler accepts.
func FuzzOllamaGenerateRequest(f *testing.F) {
	for _, s := range ollamaGenerateSeeds {
		f.Add([]byte(s))
	}
	m := tasktest.ChatMLModel(f, 128)
	a := testAPI()
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := tasktest.RequestCtx(body)
		var req generateRequest
		if err := wire.DecodeJSON(ctx, &req); err != nil {
			tasktest.CheckRefusal(t, err)
			return
		}
		job, err := a.generateJob(ctx, m, &req)
		if err != nil {
			tasktest.CheckRefusal(t, err)
			return
		}
		checkOllamaJob(t, m, job)
		if job.req != nil && (job.req.Class == sched.FIM) != (req.Suffix != "") {
			t.Fatalf("class %v for suffix %q", job.req.Class, req.Suffix)
		}
	})
}

var ollamaChatSeeds = []string{
	`{"model":"tiny","messages":[{"role":"user","content":"hello"}]}`,
	`{"model":"tiny","messages":[{"role":"System","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}],"stream":false}`,
	`{"model":"tiny","messages":[{"role":"tool","content":"42","tool_name":"f"}],"options":{"num_predict":-2}}`,
	`{"model":"tiny","messages":[]}`,
	`{"model":"tiny","messages":[{"role":"user","content":"hi","images":["aGk="]}],"tools":[{"type":"function"}]}`,
	`{"model":"tiny","messages":[{"role":"assistant","content":"x","tool_calls":[{"function":{"name":"f"}}]}]}`,
	`{"model":"nope","messages":[{"role":"user","content":"hi"}],"format":{"type":"object"}}`,
	`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"think":true,"options":{"temperature":5e-324}}`,
	`{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("x", 16*128+1) + `"}]}`,
}

// Decoding and validating any /api/chat body never panics.
func FuzzOllamaChatRequest(f *testing.F) {
	for _, s := range ollamaChatSeeds {
		f.Add([]byte(s))
	}
	m := tasktest.ChatMLModel(f, 128)
	a := testAPI()
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := tasktest.RequestCtx(body)
		var req chatRequest
		if err := wire.DecodeJSON(ctx, &req); err != nil {
			tasktest.CheckRefusal(t, err)
			return
		}
		job, err := a.chatJob(ctx, m, &req)
		if err != nil {
			tasktest.CheckRefusal(t, err)
			return
		}
		checkOllamaJob(t, m, job)
	})
}

func checkOllamaJob(t *testing.T, m *task.Model, job *job) {
	t.Helper()
	if job.req == nil {
		if job.loadReason != "load" && job.loadReason != "unload" {
			t.Fatalf("a job with nothing to generate and done_reason %q", job.loadReason)
		}
		return
	}
	tasktest.CheckSpec(t, job.model, job.req)
	if job.model.Desc.Ctx > m.Desc.Ctx || job.req.MaxTokens > job.model.Desc.Ctx-len(job.req.Prompt) && job.model != m {
		t.Fatalf("window %d, limit %d for a prompt of %d", job.model.Desc.Ctx, job.req.MaxTokens, len(job.req.Prompt))
	}
}
