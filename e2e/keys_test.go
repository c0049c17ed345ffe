package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"superfluid/app"
	"superfluid/keys"
	"superfluid/task"
)

// Two keys with different policies on one server, through the official
// clients: the editor's key may chat and fill in the middle on "tiny",
// one lane at a time, 4 requests a minute; the agents' key (given by its
// SHA-256) may run the agent and background classes on any model, 600
// tokens a minute. Time stands still (the keeper's virtual clock), so no
// bucket refills while the test runs.
const keysFileJSON = `{"keys": [
  {"name": "editor", "key": "sk-editor", "classes": ["chat", "fim"], "max_lanes": 1, "requests_per_minute": 4, "models": ["tiny"]},
  {"name": "agents", "sha256": "1f9d4b2a2c1e3cb1fb5a2ef3c1eb5a0a0f2dc9d7f6b8e7de3b4a6c3a0b6f3c5d", "classes": ["agent", "background"], "tokens_per_minute": 600},
  {"name": "viewer", "key": "sk-viewer", "models": ["elsewhere"]}
]}`

// keysFile writes the keys file with the agents' key digest filled in.
func keysFile(t *testing.T) string {
	t.Helper()
	text := strings.Replace(keysFileJSON, "1f9d4b2a2c1e3cb1fb5a2ef3c1eb5a0a0f2dc9d7f6b8e7de3b4a6c3a0b6f3c5d", sha256Hex([]byte("sk-agents")), 1)
	p := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// stoppedClock is a clock that never moves.
func stoppedClock() time.Time { return time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC) }

func startKeyedStack(t *testing.T) *app.Stack {
	t.Helper()
	k, err := keys.Open(keys.Source(keysFile(t)), stoppedClock)
	if err != nil {
		t.Fatal(err)
	}
	o := app.Options{}
	o.HTTP.Keys = k
	return startStack(t, o)
}

func TestKeysPoliciesThroughOpenAIClient(t *testing.T) {
	st := startKeyedStack(t)
	ctx := context.Background()
	editor := openaiClient(st, option.WithAPIKey("sk-editor"))

	// A chat in the default class passes, with the key's request limit in
	// OpenAI's headers (it has no token limit, so no -tokens trio).
	var resp *http.Response
	if _, err := editor.Chat.Completions.New(ctx, greedyChat("hi", 2), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if h := resp.Header; h.Get("x-ratelimit-limit-requests") != "4" || h.Get("x-ratelimit-remaining-requests") != "3" ||
		h.Get("x-ratelimit-reset-requests") != "15s" || h.Get("x-ratelimit-limit-tokens") != "" {
		t.Fatalf("rate-limit headers after one request: %v", h)
	}

	// The agent class is not the editor's: 403 naming it.
	_, err := editor.Chat.Completions.New(ctx, greedyChat("hi", 2), option.WithHeader("X-Superfluid-Class", "agent"))
	if e := openaiError(t, err, 403); e.Type != "permission_error" || !strings.Contains(e.Message, "agent class") {
		t.Fatalf("agent class: %+v", e)
	}
	// A model outside its list is an unknown model.
	p := greedyChat("hi", 2)
	p.Model = "elsewhere"
	_, err = editor.Chat.Completions.New(ctx, p)
	if e := openaiError(t, err, 404); !strings.Contains(e.Message, "elsewhere") {
		t.Fatalf("model outside the list: %+v", e)
	}
	// Two choices over a cap of one lane: 429, the first rolled back.
	p = greedyChat("hi", 2)
	p.N = openai.Int(2)
	_, err = editor.Chat.Completions.New(ctx, p)
	if e := openaiError(t, err, 429); !strings.Contains(e.Message, "lanes") || e.Response.Header.Get("Retry-After") != "1" {
		t.Fatalf("two lanes: %+v %v", e, e.Response.Header)
	}
	// That was the fourth request of a minute; the fifth is over the rate.
	_, err = editor.Chat.Completions.New(ctx, greedyChat("hi", 2))
	e := openaiError(t, err, 429)
	h := e.Response.Header
	if e.Type != "rate_limit_error" || e.Code != "rate_limit_exceeded" || h.Get("Retry-After") != "15" ||
		h.Get("x-ratelimit-limit-requests") != "4" || h.Get("x-ratelimit-remaining-requests") != "0" || h.Get("x-ratelimit-reset-requests") != "1m0s" {
		t.Fatalf("over the rate: %+v %v", e, h)
	}

	// The agents' key: its own class passes, the default (chat) does not.
	agents := openaiClient(st, option.WithAPIKey("sk-agents"))
	if _, err := agents.Chat.Completions.New(ctx, greedyChat("hi", 2)); openaiError(t, err, 403).Param != "class" {
		t.Fatalf("agents in chat: %v", err)
	}
	if _, err := agents.Chat.Completions.New(ctx, greedyChat("hi", 2), option.WithHeader("X-Superfluid-Class", "agent"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if left, _ := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-tokens")); resp.Header.Get("x-ratelimit-limit-tokens") != "600" || left >= 600 || left < 500 {
		t.Fatalf("tokens after one short chat: %v", resp.Header)
	}
	// An unknown key: 401.
	nobody := openaiClient(st, option.WithAPIKey("sk-nobody"))
	_, err = nobody.Models.List(ctx)
	if e := openaiError(t, err, 401); e.Type != "authentication_error" {
		t.Fatalf("unknown key: %+v", e)
	}
	checkKeyMetrics(t, st, map[string]float64{
		`superfluid_key_requests_total{key="editor"}`:                      5,
		`superfluid_key_rate_limited_total{key="editor",limit="requests"}`: 1,
		`superfluid_key_rate_limited_total{key="editor",limit="lanes"}`:    1,
		`superfluid_key_forbidden_total{key="editor",what="class"}`:        1,
		`superfluid_key_forbidden_total{key="editor",what="model"}`:        1,
		`superfluid_key_forbidden_total{key="agents",what="class"}`:        1,
		`superfluid_key_requests_total{key="agents"}`:                      3, // the scrape is one
		`superfluid_key_unauthorized_total`:                                1,
		`superfluid_key_lanes_in_flight{key="editor"}`:                     0,
		`superfluid_key_requests_in_flight{key="editor"}`:                  0,
		`superfluid_key_requests_in_flight{key="agents"}`:                  1, // the scrape
	}, "sk-agents")
}

// The Anthropic client with the agents' key, held to its tokens per
// minute: each message is charged its prompt and max_tokens at
// admission, settled at its end; past the bucket, 429 with Anthropic's
// own headers.
func TestKeysTokensThroughAnthropicClient(t *testing.T) {
	st := startKeyedStack(t)
	ctx := context.Background()
	agents := anthropic.NewClient(aoption.WithBaseURL(st.URL()), aoption.WithAPIKey("sk-agents"), aoption.WithMaxRetries(0),
		aoption.WithJSONSet("temperature", 0), aoption.WithHeader("X-Superfluid-Class", "agent"))
	msg := anthropicGreedy(200, anthropic.NewUserMessage(anthropic.NewTextBlock("hello")))
	var resp *http.Response
	if _, err := agents.Messages.New(ctx, msg, aoption.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	left, _ := strconv.Atoi(resp.Header.Get("anthropic-ratelimit-tokens-remaining"))
	reset, err := time.Parse(time.RFC3339, resp.Header.Get("anthropic-ratelimit-tokens-reset"))
	if resp.Header.Get("anthropic-ratelimit-tokens-limit") != "600" || left < 200 || left >= 600 || err != nil || !reset.After(stoppedClock()) {
		t.Fatalf("after one message: %v", resp.Header)
	}
	// max_tokens past what is left: refused until the bucket holds it.
	_, err = agents.Messages.New(ctx, anthropicGreedy(int64(left), anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Type() != "rate_limit_error" {
		t.Fatalf("over the tokens: %v", err)
	}
	h := ae.Response.Header
	if h.Get("Retry-After") == "" || h.Get("anthropic-ratelimit-tokens-limit") != "600" || h.Get("anthropic-ratelimit-tokens-reset") == "" ||
		h.Get("anthropic-ratelimit-requests-limit") != "" {
		t.Fatalf("429 headers: %v", h)
	}
	// The editor's key may not use the agent class the header names.
	editor := anthropic.NewClient(aoption.WithBaseURL(st.URL()), aoption.WithAPIKey("sk-editor"), aoption.WithMaxRetries(0),
		aoption.WithHeader("X-Superfluid-Class", "agent"))
	_, err = editor.Messages.New(ctx, msg)
	if !errors.As(err, &ae) || ae.StatusCode != 403 || ae.Type() != "permission_error" || !strings.Contains(ae.Message, "agent class") {
		t.Fatalf("editor in the agent class: %v", err)
	}
	// Work that escapes a policy is refused to a key that has one.
	for _, tc := range []struct{ api, method, path, key, body string }{
		{"openai", "POST", "/v1/batches", "sk-agents", `{"input_file_id": "file-x", "endpoint": "/v1/chat/completions", "completion_window": "24h"}`},
		{"ollama", "POST", "/api/pull", "sk-editor", `{"model": "hf.co/x/y"}`},
		{"ollama", "DELETE", "/api/delete", "sk-editor", `{"model": "tiny"}`},
	} {
		status, b := sendBody(t, tc.method, st.URL()+tc.path, []byte(tc.body), map[string]string{"Authorization": "Bearer " + tc.key})
		expectError(t, tc.api, status, 403, b, func(e apiErrorBody) string {
			if !strings.Contains(e.Message, "policy") {
				return tc.path + ": " + e.Message
			}
			return ""
		})
	}
	nobody := anthropic.NewClient(aoption.WithBaseURL(st.URL()), aoption.WithAPIKey("sk-nobody"), aoption.WithMaxRetries(0))
	_, err = nobody.Messages.New(ctx, msg)
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type() != "authentication_error" {
		t.Fatalf("unknown key: %v", err)
	}
}

// A lane is held from admission to the generation's end, whichever
// request holds it: a second request of the editor's key while its first
// generates is 429, and passes once the first has ended.
func TestKeysLaneCapAcrossRequests(t *testing.T) {
	st := startKeyedStack(t)
	reached, release := make(chan struct{}), make(chan struct{})
	hook := func(s *task.Spec, n int) {
		if n == 1 {
			close(reached)
			<-release
		}
	}
	task.TokenHook.Store(&hook)
	defer task.TokenHook.Store(nil)
	editor := openaiClient(st, option.WithAPIKey("sk-editor"))
	first := make(chan error, 1)
	go func() {
		_, err := editor.Chat.Completions.New(context.Background(), greedyChat("hi", 4))
		first <- err
	}()
	<-reached
	task.TokenHook.Store(nil)
	_, err := editor.Chat.Completions.New(context.Background(), greedyChat("hi", 2))
	if e := openaiError(t, err, 429); !strings.Contains(e.Message, "lanes") {
		t.Fatalf("second request while the first generates: %+v", e)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The lane frees when the scheduler ends the generation, just after
	// the answer: wait for the gauge, not for a time.
	for !strings.Contains(scrape(t, st, "sk-agents"), `superfluid_key_lanes_in_flight{key="editor"} 0`) {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := editor.Chat.Completions.New(context.Background(), greedyChat("hi", 2)); err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
}

// Ollama and llama.cpp have no rate-limit headers of their own: their 429
// carries Retry-After alone, in each API's error shape.
func TestKeys429OnOllamaAndLlamaCpp(t *testing.T) {
	st := startKeyedStack(t)
	auth := map[string]string{"Authorization": "Bearer sk-editor"}
	for i := range 4 {
		if status, b := sendBody(t, "POST", st.URL()+"/tokenize", []byte(`{"content": "hi"}`), auth); status != 200 {
			t.Fatalf("request %d: %d %s", i, status, b)
		}
	}
	for _, tc := range []struct{ api, path, body string }{
		{"ollama", "/api/generate", `{"model": "tiny", "prompt": "hi", "stream": false}`},
		{"llamacpp", "/completion", `{"prompt": "hi", "n_predict": 2}`},
	} {
		req, _ := http.NewRequest("POST", st.URL()+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer sk-editor")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, tc.api, resp.StatusCode, 429, body, nil)
		if resp.Header.Get("Retry-After") != "15" || resp.Header.Get("x-ratelimit-limit-requests") != "" || resp.Header.Get("anthropic-ratelimit-requests-limit") != "" {
			t.Errorf("%s: headers %v", tc.api, resp.Header)
		}
	}
}

// openaiError is err as the OpenAI client's error with the given status
// (when one is given), failing the test otherwise.
func openaiError(t *testing.T, err error, status ...int) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an API error, got %v", err)
	}
	if len(status) > 0 && e.StatusCode != status[0] {
		t.Fatalf("status %d, want %d: %s", e.StatusCode, status[0], e.Message)
	}
	return e
}

// scrape reads /metrics with key.
func scrape(t *testing.T, st *app.Stack, key string) string {
	t.Helper()
	status, b := sendBody(t, "GET", st.URL()+"/metrics", nil, map[string]string{"Authorization": "Bearer " + key})
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, b)
	}
	return string(b)
}

// checkKeyMetrics checks the samples of a /metrics scrape.
func checkKeyMetrics(t *testing.T, st *app.Stack, want map[string]float64, key string) {
	t.Helper()
	page := scrape(t, st, key)
	for sample, v := range want {
		if !strings.Contains(page, "\n"+sample+" "+strconv.FormatFloat(v, 'g', -1, 64)+"\n") {
			t.Errorf("/metrics: want %s %v", sample, v)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepLines(page, "superfluid_key_"))
	}
	if strings.Contains(page, "sk-editor") || strings.Contains(page, "sk-agents") {
		t.Error("/metrics shows a key")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The keys file of a real process, named by SUPERFLUID_API_KEYS, is read
// again on SIGHUP: a removed key is refused at once, an added one passes,
// a key whose name survives keeps what it spent (a new key for the same
// name finds the minute's one request used); a bad file keeps the keys in
// force and the log says why.
func TestKeysFileReloadedOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"keys": [{"name": "team", "key": "sk-old", "requests_per_minute": 1}, {"name": "gone", "key": "sk-gone"}]}`)
	p := startServe(t, []string{"SUPERFLUID_API_KEYS=" + path, "SUPERFLUID_THREADS=1"},
		"--model", tinyModel(t), "--port", "0", "--alias", "tiny", "--park-dir", "off")
	get := func(key string) (int, http.Header) {
		req, _ := http.NewRequest("GET", p.url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	if s, h := get("sk-old"); s != 200 || h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("sk-old: %d %v", s, h)
	}
	if s, _ := get("sk-gone"); s != 200 {
		t.Fatalf("sk-gone: %d", s)
	}
	reload := func(wantLog string, n int) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for strings.Count(p.stderr.String(), wantLog) < n {
			select {
			case <-p.exited:
				t.Fatalf("serve exited on SIGHUP:\n%s", p.stderr)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	write(`{"keys": [{"name": "team", "key": "sk-new", "requests_per_minute": 1}, {"name": "added", "key": "sk-added"}]}`)
	reload("api keys in force", 2)
	for key, want := range map[string]int{"sk-old": 401, "sk-gone": 401, "sk-added": 200, "sk-new": 429} {
		if s, h := get(key); s != want {
			t.Errorf("%s after the reload: %d, want %d", key, s, want)
		} else if want == 429 && h.Get("Retry-After") == "" {
			t.Errorf("%s: 429 without Retry-After: %v", key, h)
		}
	}
	write(`{"keys": [{"name": "team", "key": "sk-newer", "max_lanes": "two"}]}`)
	reload("were not reloaded", 1)
	if s, _ := get("sk-added"); s != 200 {
		t.Errorf("sk-added after a bad file: %d, want the keys in force kept", s)
	}
	if s, _ := get("sk-newer"); s != 401 {
		t.Errorf("sk-newer from the bad file: %d", s)
	}
	log := p.stderr.String()
	for _, key := range []string{"sk-old", "sk-gone", "sk-new", "sk-added", "sk-newer"} {
		if strings.Contains(log, key) {
			t.Errorf("the log shows the key %s:\n%s", key, log)
		}
	}
}

// SUPERFLUID_API_KEYS may hold the JSON itself; a bad one stops serve
// before it listens, naming what is wrong.
func TestKeysInlineAndRefusedAtStart(t *testing.T) {
	p := startServe(t, []string{`SUPERFLUID_API_KEYS={"keys": [{"name": "inline", "key": "sk-inline", "classes": ["background"]}]}`, "SUPERFLUID_THREADS=1"},
		"--model", tinyModel(t), "--port", "0", "--alias", "tiny", "--park-dir", "off")
	status, b := sendBody(t, "POST", p.url+"/v1/chat/completions", []byte(`{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`),
		map[string]string{"Authorization": "Bearer sk-inline"})
	expectError(t, "openai", status, 403, b, func(e apiErrorBody) string {
		if !strings.Contains(e.Message, "chat class") {
			return "message " + e.Message
		}
		return ""
	})
	if strings.Contains(p.stderr.String(), "sk-inline") {
		t.Error("the log shows the inline key")
	}

	bad := exec.Command(superfluidBinary(t), "serve", "--model", tinyModel(t), "--port", "0", "--api-keys-file", `{"keys": [{"name": "x", "key": "k", "tokens_per_minute": -1}]}`)
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tokens_per_minute") {
		t.Fatalf("a bad keys file: %v\n%s", err, out)
	}
}

// A key without the fim class gets no fill-in-the-middle answer, not even
// one the completion cache holds from another key's identical request.
func TestKeysClassHeldOverCompletionCache(t *testing.T) {
	st := startKeyedStack(t)
	body := []byte(`{"input_prefix": "def f(", "input_suffix": "\n", "n_predict": 3, "temperature": 0}`)
	for _, tc := range []struct {
		key    string
		status int
	}{{"sk-editor", 200}, {"sk-editor", 200}, {"sk-agents", 403}} {
		status, b := sendBody(t, "POST", st.URL()+"/infill", body, map[string]string{"x-api-key": tc.key})
		expectError(t, "llamacpp", status, tc.status, b, func(e apiErrorBody) string {
			if !strings.Contains(e.Message, "fim class") {
				return "message " + e.Message
			}
			return ""
		})
	}
}

// A key's model list also bounds what it sees: the listings show only its
// models, and a request naming none is refused the default one it may
// not use, as an unknown model.
func TestKeysListingsShowOnlyTheKeysModels(t *testing.T) {
	st := startKeyedStack(t)
	auth := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	for _, tc := range []struct{ key, path, want string }{
		{"sk-editor", "/v1/models", `"id":"tiny"`},
		{"sk-viewer", "/v1/models", `"data":[]`},
		{"sk-editor", "/api/tags", `"name":"tiny:latest"`},
		{"sk-viewer", "/api/tags", `"models":[]`},
		{"sk-viewer", "/api/ps", `"models":[]`},
	} {
		status, b := sendBody(t, "GET", st.URL()+tc.path, nil, auth(tc.key))
		if status != 200 || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s %s: %d %s, want %s", tc.key, tc.path, status, b, tc.want)
		}
	}
	status, b := sendBody(t, "POST", st.URL()+"/v1/chat/completions", []byte(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`), auth("sk-viewer"))
	expectError(t, "openai", status, 404, b, nil)
}
