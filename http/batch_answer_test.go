package http

import (
	"context"
	"errors"
	"strings"
	"testing"

	"superfluid/sched"
)

// Dispatch runs a route in-process: the same checks and the same
// scheduler submission as over a socket, under the caller's class, without
// the API key a batch's submitter already presented.
func TestDispatchRunsRoutesInProcess(t *testing.T) {
	s, err := NewServer(Config{APIKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	m, sc := stubModel(t)
	s.SetModel(m)
	ctx := context.Background()

	status, body, err := s.Dispatch(ctx, "GET", "/v1/models", nil, "")
	if err != nil || status != 200 || !strings.Contains(string(body), `"stub"`) {
		t.Fatalf("models: %d %s %v", status, body, err)
	}
	status, body, err = s.Dispatch(ctx, "POST", "/v1/completions", []byte(`{"prompt":`), "")
	if err != nil || status != 400 || !strings.Contains(string(body), `"invalid_request_error"`) {
		t.Fatalf("malformed: %d %s %v", status, body, err)
	}
	status, body, err = s.Dispatch(ctx, "POST", "/v1/completions", []byte(`{"prompt":"hi","max_tokens":2}`), "background")
	if err != nil || !strings.Contains(string(body), errStubRefused.Error()) {
		t.Fatalf("completion: %d %s %v, want the stub scheduler's refusal", status, body, err)
	}
	if got := sc.taken(); len(got) != 1 || got[0].Class != sched.Background {
		t.Fatalf("submitted %+v, want one background request", got)
	}
	status, _, _ = s.Dispatch(ctx, "POST", "/v1/completions", []byte(`{"prompt":"hi"}`), "nonsense")
	if status != 400 {
		t.Fatalf("unknown class: %d, want 400", status)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Dispatch(cancelled, "GET", "/v1/models", nil, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}

	s.gate.drain()
	if status, _, _ := s.Dispatch(ctx, "GET", "/v1/models", nil, ""); status != 503 {
		t.Fatalf("draining: %d, want 503", status)
	}
}
