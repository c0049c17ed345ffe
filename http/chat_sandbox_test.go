package http

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"superfluid/chat"
)

// A render that crosses a sandbox bound is a 400 naming the bound, in the
// API's error shape, and the server goes on answering.
func TestChatRenderBeyondABoundIs400(t *testing.T) {
	ts := startToy(t, toyOptions{})
	// Within its bounds for a few turns, beyond the step bound for many.
	src := "{% for m in messages %}{% for i in range(100) %}{% endfor %}{{ m.content }}{% endfor %}"
	tmpl, err := chat.Parse(src, chat.Options{Limits: chat.Limits{Steps: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	m := *ts.srv.registry().(singleModel).m
	m.Chat = tmpl
	ts.srv.SetModel(&m)
	turns := make([]string, 40)
	for i := range turns {
		turns[i] = `{"role": "user", "content": "hi"}`
	}
	status, body := ts.post(t, "/v1/chat/completions", `{"messages": [`+strings.Join(turns, ",")+`], "max_tokens": 1}`)
	if status != 400 || !strings.Contains(body, "step count") || !strings.Contains(body, `"invalid_request_error"`) {
		t.Fatalf("40 turns: %d %s", status, body)
	}
	status, body = ts.post(t, "/v1/chat/completions", `{"messages": [`+strings.Join(turns[:2], ",")+`], "max_tokens": 1}`)
	if status != 200 {
		t.Fatalf("2 turns after the refusal: %d %s", status, body)
	}
}

// A model whose template was refused at load answers every chat route 400
// with the reason, and what to do instead.
func TestChatTemplateRefusedAtLoadIs400WithTheReason(t *testing.T) {
	ts := startToy(t, toyOptions{})
	m := *ts.srv.registry().(singleModel).m
	m.Chat = nil
	m.ChatRefused = fmt.Errorf("the model's chat template was refused at load: %w", &chat.BoundError{Bound: chat.BoundRecursion, Limit: 4000})
	if !errors.Is(m.ChatRefused, chat.ErrBound) {
		t.Fatal("a refusal for a bound is not ErrBound")
	}
	ts.srv.SetModel(&m)
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"messages": [{"role": "user", "content": "hi"}]}`,
		"/api/chat":            `{"model": "toy", "messages": [{"role": "user", "content": "hi"}], "stream": false}`,
		"/apply-template":      `{"messages": [{"role": "user", "content": "hi"}]}`,
	} {
		status, resp := ts.post(t, path, body)
		if status != 400 || !strings.Contains(resp, "refused at load") || !strings.Contains(resp, "recursion depth") {
			t.Errorf("%s: %d %s", path, status, resp)
		}
	}
}
