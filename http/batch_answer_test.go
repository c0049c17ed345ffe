package http

import (
	"context"
	"errors"
	"strings"
	"testing"

	"superfluid/sched"
	"superfluid/task/tasktest"
)

// AnswerBatch runs a batch request through the core: the same checks and
// the same scheduler submission as over a socket, under the caller's
// class, without the API key a batch's submitter already presented.
func TestAnswerBatchRunsRequestsThroughTheCore(t *testing.T) {
	s, err := NewServer(Config{APIKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	m, sc := stubModel(t)
	s.SetModel(m)
	ctx := context.Background()

	status, body, err := s.AnswerBatch(ctx, "/v1/completions", []byte(`{"prompt":`), "")
	if err != nil || status != 400 || !strings.Contains(string(body), `"invalid_request_error"`) {
		t.Fatalf("malformed: %d %s %v", status, body, err)
	}
	status, body, err = s.AnswerBatch(ctx, "/v1/completions", []byte(`{"prompt":"hi","max_tokens":2}`), "background")
	if err != nil || !strings.Contains(string(body), tasktest.ErrStubRefused.Error()) {
		t.Fatalf("completion: %d %s %v, want the stub scheduler's refusal", status, body, err)
	}
	if got := sc.Taken(); len(got) != 1 || got[0].Class != sched.Background {
		t.Fatalf("submitted %+v, want one background request", got)
	}
	status, _, _ = s.AnswerBatch(ctx, "/v1/completions", []byte(`{"prompt":"hi"}`), "nonsense")
	if status != 400 {
		t.Fatalf("unknown class: %d, want 400", status)
	}
	status, body, _ = s.AnswerBatch(ctx, "/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`), "")
	if status != 400 || !strings.Contains(string(body), `"stream"`) {
		t.Fatalf("streamed: %d %s, want 400 naming stream", status, body)
	}
	status, _, _ = s.AnswerBatch(ctx, "/v1/models", nil, "")
	if status != 404 && status != 405 {
		t.Fatalf("not a batch route: %d", status)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.AnswerBatch(cancelled, "/v1/completions", []byte(`{"prompt":"hi"}`), ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}

	s.gate.drain()
	if status, _, _ := s.AnswerBatch(ctx, "/v1/completions", []byte(`{"prompt":"hi"}`), ""); status != 503 {
		t.Fatalf("draining: %d, want 503", status)
	}
}
