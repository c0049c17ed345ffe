package openai

import (
	"context"
	"strings"
	"testing"

	"superfluid/sched"
	"superfluid/task/tasktest"
)

// Answer decodes a batch line for its route and runs it whole in the
// caller's class, answering in OpenAI's shape whatever happens.
func TestAnswerRunsABatchLineInItsClass(t *testing.T) {
	m, sc := tasktest.StubModel(t)
	m.Desc.Ctx = 2048 // room for the tools' system prompt
	ctx := context.Background()
	chat := `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":2}`
	status, body := Answer(ctx, m, "/v1/chat/completions", []byte(chat), sched.Background, nil, nil)
	if status < 400 || !strings.Contains(string(body), tasktest.ErrStubRefused.Error()) {
		t.Fatalf("chat: %d %s, want the stub scheduler's refusal", status, body)
	}
	// A named class wins over the agent class a turn with tools would take.
	if got := sc.Taken(); len(got) != 1 || got[0].Class != sched.Background {
		t.Fatalf("submitted %+v, want one background request", got)
	}
	for _, c := range []struct {
		url, body, want string
		status          int
	}{
		{"/v1/chat/completions", `{"messages":[]}`, `"messages"`, 400},
		{"/v1/completions", `{"prompt":"hi","stream":true}`, `"stream"`, 400},
		{"/v1/completions", `{"prompt":`, `"invalid_request_error"`, 400},
		{"/v1/embeddings", `{"input":"hi"}`, `"error"`, 400},
		{"/v1/models", ``, `"error"`, 404},
	} {
		status, body := Answer(ctx, m, c.url, []byte(c.body), sched.Background, nil, nil)
		if status != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.url, c.body, status, body, c.status, c.want)
		}
	}
	if got := sc.Taken(); len(got) != 0 {
		t.Fatalf("refused lines reached the scheduler: %+v", got)
	}
}
