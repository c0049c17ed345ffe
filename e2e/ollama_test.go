package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"superfluid/app"
)

// Ollama's own Go client is the reference for "field for field": if it
// cannot decode a response, the server is wrong whatever our structs say.

func ollamaClient(t *testing.T, st *app.Stack) *api.Client {
	t.Helper()
	base, err := url.Parse(st.URL())
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(base, http.DefaultClient)
}

// ollamaGreedy is Ollama options for deterministic output of n tokens.
func ollamaGreedy(n int) map[string]any {
	return map[string]any{"temperature": 0, "num_predict": n}
}

// referenceChatText is the greedy reply of the OpenAI chat route to msgs
// (role, content pairs): the text every other API must reproduce for the
// same conversation, with its prompt length.
func referenceChatText(t *testing.T, st *app.Stack, maxTokens int, msgs ...string) (string, int) {
	t.Helper()
	var list []map[string]string
	for i := 0; i+1 < len(msgs); i += 2 {
		list = append(list, map[string]string{"role": msgs[i], "content": msgs[i+1]})
	}
	body, _ := json.Marshal(map[string]any{"model": "tiny", "messages": list, "max_tokens": maxTokens, "temperature": 0})
	resp, err := http.Post(st.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("reference chat: status %d, %v, %+v", resp.StatusCode, err, out)
	}
	if out.Choices[0].Message.Content == "" {
		t.Fatal("reference chat: empty reply; the comparison would prove nothing")
	}
	return out.Choices[0].Message.Content, out.Usage.PromptTokens
}

// ollamaGenerate runs a generate request through the client, returning the
// concatenated text, the last response and how many responses came.
func ollamaGenerate(t *testing.T, c *api.Client, req *api.GenerateRequest) (string, api.GenerateResponse, int) {
	t.Helper()
	var text strings.Builder
	var last api.GenerateResponse
	n := 0
	err := c.Generate(context.Background(), req, func(r api.GenerateResponse) error {
		if last.Done {
			t.Errorf("a response after done: %+v", r)
		}
		text.WriteString(r.Response)
		last, n = r, n+1
		return nil
	})
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if !last.Done {
		t.Fatalf("the last response is not done: %+v", last)
	}
	return text.String(), last, n
}

func ollamaChat(t *testing.T, c *api.Client, req *api.ChatRequest) (string, api.ChatResponse, int) {
	t.Helper()
	var text strings.Builder
	var last api.ChatResponse
	n := 0
	err := c.Chat(context.Background(), req, func(r api.ChatResponse) error {
		if r.Message.Role != "assistant" {
			t.Errorf("message role %q", r.Message.Role)
		}
		text.WriteString(r.Message.Content)
		last, n = r, n+1
		return nil
	})
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if !last.Done {
		t.Fatalf("the last response is not done: %+v", last)
	}
	return text.String(), last, n
}

// The discovery endpoints answer what Ollama's client and Continue read:
// a running server, a version, the model listed and running, and a
// template with .Suffix for a FIM-capable model.
func TestOllamaDiscovery(t *testing.T) {
	st := startStack(t, app.Options{})
	c := ollamaClient(t, st)
	ctx := context.Background()
	if err := c.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	resp, err := http.Get(st.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "Ollama is running" {
		t.Errorf("GET / = %q", b)
	}
	if v, err := c.Version(ctx); err != nil || v == "" || v[0] < '0' || v[0] > '9' {
		t.Errorf("version %q, %v", v, err)
	}

	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	lm := list.Models[0]
	if lm.Name != "tiny:latest" || lm.Model != "tiny:latest" || lm.Size <= 0 || len(lm.Digest) != 64 || lm.ModifiedAt.IsZero() ||
		lm.Details.Format != "gguf" || lm.Details.Family != "llama" || lm.Details.QuantizationLevel != "F16" || lm.Details.ParameterSize == "" {
		t.Errorf("listed model %+v", lm)
	}

	ps, err := c.ListRunning(ctx)
	if err != nil || len(ps.Models) != 1 {
		t.Fatalf("ps: %+v, %v", ps, err)
	}
	pm := ps.Models[0]
	if pm.Name != "tiny:latest" || pm.SizeVRAM != 0 || pm.ContextLength != 4096 || pm.Digest != lm.Digest || pm.ExpiresAt.Year() < 2100 {
		t.Errorf("running model %+v", pm)
	}

	for _, name := range []string{"tiny", "tiny:latest"} {
		show, err := c.Show(ctx, &api.ShowRequest{Model: name})
		if err != nil {
			t.Fatalf("show %s: %v", name, err)
		}
		if !strings.Contains(show.Template, ".Suffix") || !strings.Contains(show.Template, "<|fim_prefix|>") {
			t.Errorf("template %q lacks the FIM format", show.Template)
		}
		caps := make([]string, len(show.Capabilities))
		for i, c := range show.Capabilities {
			caps[i] = string(c)
		}
		if !slices.Contains(caps, "completion") || !slices.Contains(caps, "insert") {
			t.Errorf("capabilities %v", caps)
		}
		if show.ModelInfo["general.architecture"] != "llama" || show.ModelInfo["llama.context_length"] != float64(4096) {
			t.Errorf("model_info %v", show.ModelInfo)
		}
		if v, ok := show.ModelInfo["tokenizer.ggml.tokens"]; !ok || v != nil {
			t.Errorf("the vocabulary should be listed as null, got %T", v)
		}
		if show.Details.Format != "gguf" || !strings.Contains(show.Modelfile, "FROM ") || !strings.Contains(show.Parameters, "num_ctx") {
			t.Errorf("show %+v", show)
		}
	}
	verbose, err := c.Show(ctx, &api.ShowRequest{Model: "tiny", Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if toks, _ := verbose.ModelInfo["tokenizer.ggml.tokens"].([]any); len(toks) == 0 {
		t.Error("verbose show lacks the vocabulary")
	}
}

// Greedy text is the same on every route for the same conversation:
// Ollama's generate (templated and raw, whole and streamed) and chat
// (whole and streamed) reproduce the OpenAI chat route's reply.
func TestOllamaGreedyTextAgreesWithOpenAIChat(t *testing.T) {
	st := startStack(t, app.Options{})
	c := ollamaClient(t, st)
	want, promptLen := referenceChatText(t, st, 16, "user", "hello")
	no := false

	text, last, n := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "hello", Options: ollamaGreedy(16), Stream: &no})
	if text != want || n != 1 {
		t.Errorf("generate: %q in %d responses, want %q in 1", text, n, want)
	}
	if last.DoneReason != "length" || last.EvalCount != 16 || last.PromptEvalCount != promptLen || len(last.Context) != promptLen+16 ||
		last.TotalDuration <= 0 || last.EvalDuration <= 0 || last.PromptEvalDuration <= 0 {
		t.Errorf("generate final response %+v", last)
	}
	streamed, slast, n := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "hello", Options: ollamaGreedy(16)})
	if streamed != want || n < 2 || slast.Response != "" || slast.EvalCount != 16 {
		t.Errorf("streamed generate: %q in %d responses (last %+v), want %q", streamed, n, slast, want)
	}
	raw, rlast, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Raw: true, Options: ollamaGreedy(16),
		Prompt: "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"})
	if raw != want || rlast.Context != nil {
		t.Errorf("raw generate: %q (context %v), want %q without context", raw, rlast.Context, want)
	}

	msgs := []api.Message{{Role: "user", Content: "hello"}}
	whole, clast, n := ollamaChat(t, c, &api.ChatRequest{Model: "tiny", Messages: msgs, Options: ollamaGreedy(16), Stream: &no})
	if whole != want || n != 1 || clast.DoneReason != "length" || clast.EvalCount != 16 || clast.PromptEvalCount != promptLen {
		t.Errorf("chat: %q in %d (%+v), want %q", whole, n, clast, want)
	}
	streamedChat, _, n := ollamaChat(t, c, &api.ChatRequest{Model: "tiny", Messages: msgs, Options: ollamaGreedy(16)})
	if streamedChat != want || n < 2 {
		t.Errorf("streamed chat: %q in %d responses, want %q", streamedChat, n, want)
	}

	// A system prompt renders as the system message of the same chat.
	wantSys, _ := referenceChatText(t, st, 8, "system", "be brief", "user", "hello")
	sys, _, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", System: "be brief", Prompt: "hello", Options: ollamaGreedy(8)})
	if sys != wantSys {
		t.Errorf("generate with system: %q, want %q", sys, wantSys)
	}

	// The returned context continues the conversation: its tokens come
	// first in the next prompt.
	_, next, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "again", Context: last.Context, Options: ollamaGreedy(4)})
	if next.PromptEvalCount <= len(last.Context) || next.EvalCount != 4 || !slices.Equal(next.Context[:len(last.Context)], last.Context) {
		t.Errorf("continued generate: prompt %d tokens after a context of %d; %+v", next.PromptEvalCount, len(last.Context), next)
	}
}

// A suffix makes /api/generate a FIM request in the model's own format:
// the reply equals a raw prompt spelled in that format, streamed and whole
// replies agree (the second is served from the completion cache), and
// stop strings end it.
func TestOllamaGenerateWithSuffix(t *testing.T) {
	st := startStack(t, app.Options{})
	c := ollamaClient(t, st)
	prefix, suffix := "def add(a, b):\n    ", "\n    return c\n"
	streamed, last, n := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: prefix, Suffix: suffix, Options: ollamaGreedy(12)})
	if streamed == "" || n < 2 || last.EvalCount == 0 || last.Context != nil {
		t.Fatalf("FIM: %q in %d responses, last %+v", streamed, n, last)
	}
	no := false
	whole, wlast, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: prefix, Suffix: suffix, Options: ollamaGreedy(12), Stream: &no})
	if whole != streamed || wlast.DoneReason != last.DoneReason {
		t.Errorf("whole FIM %q (%s), streamed %q (%s)", whole, wlast.DoneReason, streamed, last.DoneReason)
	}
	raw, _, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Raw: true, Options: ollamaGreedy(12),
		Prompt: "<|fim_prefix|>" + prefix + "<|fim_suffix|>" + suffix + "<|fim_middle|>"})
	if !strings.HasPrefix(raw, streamed) {
		t.Errorf("FIM %q is not what the spelled-out FIM prompt gives: %q", streamed, raw)
	}
	if len(streamed) > 2 {
		stop := streamed[1:3]
		opts := ollamaGreedy(12)
		opts["stop"] = []string{stop}
		cut, clast, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: prefix, Suffix: suffix, Options: opts})
		if cut != streamed[:strings.Index(streamed, stop)] || clast.DoneReason != "stop" {
			t.Errorf("stop %q: %q (%s), from %q", stop, cut, clast.DoneReason, streamed)
		}
	}
}

// A request with nothing to generate loads the model (it is always
// loaded) and answers done at once; keep_alive 0 asks to unload.
func TestOllamaLoadRequests(t *testing.T) {
	st := startStack(t, app.Options{})
	c := ollamaClient(t, st)
	_, last, n := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny"})
	if n != 1 || last.DoneReason != "load" || last.Model != "tiny" {
		t.Errorf("load: %d responses, %+v", n, last)
	}
	_, clast, _ := ollamaChat(t, c, &api.ChatRequest{Model: "tiny:latest", KeepAlive: &api.Duration{}})
	if clast.DoneReason != "unload" || clast.Model != "tiny:latest" {
		t.Errorf("unload: %+v", clast)
	}
	// Unknown options are ignored, as Ollama ignores them; num_ctx narrows
	// the window, so generation stops when prompt and reply fill it.
	_, wlast, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "hello",
		Options: map[string]any{"temperature": 0, "mirostat": 2, "num_ctx": 24, "num_gpu": 0}})
	if wlast.DoneReason != "length" || wlast.PromptEvalCount+wlast.EvalCount != 24 {
		t.Errorf("num_ctx 24: %+v", wlast)
	}
}

// Bad requests get a 4xx and Ollama's {"error": "..."} shape, and the
// official client reports them as a StatusError with the code.
func TestOllamaBadInput(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 512})
	long := strings.Repeat("lorem ipsum dolor ", 400)
	cases := []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"unknown model", "/api/generate", `{"model":"nope","prompt":"hi"}`, 404, `model "nope" not found, try pulling it first`},
		{"unknown chat model", "/api/chat", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, 404, "try pulling it first"},
		{"unknown show model", "/api/show", `{"model":"nope"}`, 404, "not found"},
		{"no model", "/api/generate", `{"prompt":"hi"}`, 400, "model is required"},
		{"images", "/api/generate", `{"model":"tiny","prompt":"hi","images":["aGk="]}`, 400, "images"},
		{"chat images", "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"hi","images":["aGk="]}]}`, 400, "images"},
		{"format", "/api/generate", `{"model":"tiny","prompt":"hi","format":"xml"}`, 400, "format"},
		{"schema", "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"format":{"type":"object","patternProperties":{}}}`, 400, "format"},
		{"tools", "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a b"}}]}`, 400, "a tool name must be"},
		{"role", "/api/chat", `{"model":"tiny","messages":[{"role":"robot","content":"hi"}]}`, 400, "role"},
		{"option type", "/api/generate", `{"model":"tiny","prompt":"hi","options":{"temperature":"hot"}}`, 400, `option "temperature" must be of type float32`},
		{"int option type", "/api/generate", `{"model":"tiny","prompt":"hi","options":{"num_predict":"many"}}`, 400, `option "num_predict" must be of type integer`},
		{"stop type", "/api/generate", `{"model":"tiny","prompt":"hi","options":{"stop":"x"}}`, 400, `option "stop" must be of type array`},
		{"temperature range", "/api/generate", `{"model":"tiny","prompt":"hi","options":{"temperature":-1}}`, 400, "temperature"},
		{"stream type", "/api/generate", `{"model":"tiny","prompt":"hi","stream":"yes"}`, 400, "stream"},
		{"prompt type", "/api/generate", `{"model":"tiny","prompt":5}`, 400, "prompt"},
		{"messages type", "/api/chat", `{"model":"tiny","messages":"hi"}`, 400, "messages"},
		{"raw with system", "/api/generate", `{"model":"tiny","prompt":"hi","raw":true,"system":"s"}`, 400, "raw mode does not support"},
		{"template", "/api/generate", `{"model":"tiny","prompt":"hi","template":"{{ .Prompt }}"}`, 400, "template"},
		{"think", "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"think":"maybe"}`, 400, "think must be"},
		{"keep_alive", "/api/generate", `{"model":"tiny","prompt":"hi","keep_alive":"forever"}`, 400, "keep_alive"},
		{"context token", "/api/generate", `{"model":"tiny","prompt":"hi","context":[-3]}`, 400, "context"},
		{"too long", "/api/generate", `{"model":"tiny","prompt":"` + long + `"}`, 400, "context"},
		{"over num_ctx", "/api/generate", `{"model":"tiny","prompt":"hello there","options":{"num_ctx":4}}`, 400, "context"},
		{"malformed", "/api/generate", `{"model":"tiny",`, 400, "JSON"},
		{"empty body", "/api/chat", ``, 400, "empty"},
		{"invalid UTF-8", "/api/generate", "{\"model\":\"tiny\",\"prompt\":\"\xff\xfe\"}", 400, "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(st.URL()+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("status %d, body not JSON: %v", resp.StatusCode, err)
			}
			msg, _ := body["error"].(string)
			if resp.StatusCode != tc.status || len(body) != 1 || !strings.Contains(msg, tc.msg) {
				t.Errorf("status %d, body %v; want %d with an error containing %q", resp.StatusCode, body, tc.status, tc.msg)
			}
		})
	}

	resp, err := http.Get(st.URL() + "/api/generate")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /api/generate: %d", resp.StatusCode)
	}

	c := ollamaClient(t, st)
	err = c.Generate(context.Background(), &api.GenerateRequest{Model: "nope", Prompt: "hi"}, func(api.GenerateResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || !strings.Contains(se.ErrorMessage, "try pulling it first") {
		t.Errorf("client error %#v", err)
	}
	// The server keeps serving after all of that.
	if _, last, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "hi", Options: ollamaGreedy(2)}); last.EvalCount != 2 {
		t.Errorf("after bad input: %+v", last)
	}
}

// hangUp sends body to path on a raw connection and closes it: after the
// first streamed line, or, for a whole response, once the generation has
// had time to start. The scheduler must then count the request cancelled
// well before it could have finished on its own (the body asks for the
// whole of a large context).
func hangUp(t *testing.T, st *app.Stack, path, body string, streamed bool) {
	t.Helper()
	before := st.Sched.Stats().Cancelled
	conn, err := net.Dial("tcp", st.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	if streamed {
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			if strings.HasPrefix(line, "{") || strings.HasPrefix(line, "data: {") {
				break
			}
		}
	} else {
		time.Sleep(300 * time.Millisecond)
	}
	conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for st.Sched.Stats().Cancelled == before {
		if time.Now().After(deadline) {
			t.Fatalf("%s (streamed %v): the request was not cancelled after the client hung up", path, streamed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that hangs up cancels its generation, streamed or not.
func TestOllamaClientGoneCancels(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 16384}) // seconds of generation, even on a fast machine
	hangUp(t, st, "/api/generate", `{"model":"tiny","prompt":"hello","options":{"temperature":0}}`, true)
	hangUp(t, st, "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"hello"}],"stream":false,"options":{"temperature":0}}`, false)
}
