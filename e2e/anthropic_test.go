package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"superfluid/app"
)

// The official Anthropic Go SDK is the reference: its decoder and its
// stream accumulator must accept every response the server sends.

// anthropicClient is greedy: this SDK version no longer has a temperature
// field (newer Claude models dropped it), so temperature 0 goes into every
// request body as the raw field, which the server still reads.
func anthropicClient(st *app.Stack) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(st.URL()), option.WithAPIKey("x"), option.WithMaxRetries(0),
		option.WithJSONSet("temperature", 0))
}

func anthropicGreedy(maxTokens int64, msgs ...anthropic.MessageParam) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "tiny", MaxTokens: maxTokens, Messages: msgs}
}

// anthropicStream runs params through NewStreaming and the SDK's own
// accumulator, returning the message and the event types in order.
func anthropicStream(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, []string) {
	t.Helper()
	stream := c.Messages.NewStreaming(context.Background(), params)
	defer stream.Close()
	var msg anthropic.Message
	var events []string
	for stream.Next() {
		ev := stream.Current()
		events = append(events, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("the accumulator refused %s: %v", ev.RawJSON(), err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return msg, events
}

func messageText(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type != "text" {
			continue
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

// Messages.New and Messages.NewStreaming reproduce the OpenAI chat
// route's greedy reply for the same conversation, with Anthropic's stop
// reasons and usage (prompt = input + cache read).
func TestAnthropicSDKAgreesWithOpenAIChat(t *testing.T) {
	st := startStack(t, app.Options{})
	c := anthropicClient(st)
	ctx := context.Background()
	want, promptLen := referenceChatText(t, st, 16, "user", "hello")
	hello := anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))

	msg, err := c.Messages.New(ctx, anthropicGreedy(16, hello))
	if err != nil {
		t.Fatal(err)
	}
	if got := messageText(msg); got != want || len(msg.Content) != 1 {
		t.Errorf("New: %q in %d blocks, want %q", got, len(msg.Content), want)
	}
	u := msg.Usage
	if !strings.HasPrefix(msg.ID, "msg_") || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "tiny" ||
		msg.StopReason != anthropic.StopReasonMaxTokens || msg.StopSequence != "" ||
		u.OutputTokens != 16 || int(u.InputTokens+u.CacheReadInputTokens) != promptLen {
		t.Errorf("New: %+v", msg)
	}

	streamed, events := anthropicStream(t, c, anthropicGreedy(16, hello))
	if got := messageText(&streamed); got != want {
		t.Errorf("NewStreaming: %q, want %q", got, want)
	}
	su := streamed.Usage
	if streamed.StopReason != anthropic.StopReasonMaxTokens || su.OutputTokens != 16 || int(su.InputTokens+su.CacheReadInputTokens) != promptLen {
		t.Errorf("NewStreaming: %+v", streamed)
	}
	if len(events) < 6 || events[0] != "message_start" || events[1] != "content_block_start" ||
		events[len(events)-3] != "content_block_stop" || events[len(events)-2] != "message_delta" || events[len(events)-1] != "message_stop" {
		t.Errorf("events %v", events)
	}

	// A system prompt (string or blocks) is the chat's system message.
	wantSys, sysLen := referenceChatText(t, st, 8, "system", "be brief", "user", "hello")
	p := anthropicGreedy(8, hello)
	p.System = []anthropic.TextBlockParam{{Text: "be brief"}}
	sys, err := c.Messages.New(ctx, p)
	if err != nil || messageText(sys) != wantSys {
		t.Errorf("with system: %v, %q, want %q", err, messageText(sys), wantSys)
	}
	count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "tiny",
		Messages: []anthropic.MessageParam{hello}, System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("be brief")}})
	if err != nil || int(count.InputTokens) != sysLen {
		t.Errorf("count_tokens: %v, %+v, want %d", err, count, sysLen)
	}
}

// A stop sequence cuts the reply before it, whole and streamed, and is
// reported; a final assistant message is continued (prefill).
func TestAnthropicStopSequenceAndPrefill(t *testing.T) {
	st := startStack(t, app.Options{})
	c := anthropicClient(st)
	want, _ := referenceChatText(t, st, 16, "user", "hello")
	i := len(want) / 2
	stop := want[i : i+2]
	if !utf8.ValidString(stop) {
		t.Skipf("no ASCII stop sequence in %q", want)
	}
	cut := want[:strings.Index(want, stop)]
	hello := anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))
	p := anthropicGreedy(16, hello)
	p.StopSequences = []string{"never appears", stop}

	msg, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if messageText(msg) != cut || msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != stop {
		t.Errorf("stop %q: %q (%s, %q), want %q", stop, messageText(msg), msg.StopReason, msg.StopSequence, cut)
	}
	streamed, _ := anthropicStream(t, c, p)
	if messageText(&streamed) != cut || streamed.StopReason != anthropic.StopReasonStopSequence || streamed.StopSequence != stop {
		t.Errorf("streamed stop %q: %q (%s)", stop, messageText(&streamed), streamed.StopReason)
	}

	// Prefill: the reply continues the assistant's text; the prompt is the
	// conversation with that text appended, so the continuation is the
	// greedy reply to it.
	prefix := strings.TrimRight(want[:i], " \n\t")
	cont, err := c.Messages.New(context.Background(), anthropicGreedy(4, hello, anthropic.NewAssistantMessage(anthropic.NewTextBlock(prefix))))
	if err != nil || cont.Usage.OutputTokens != 4 || messageText(cont) == "" {
		t.Errorf("prefill %q: %v, %+v", prefix, err, cont)
	}
}

// Bad requests get a 4xx in Anthropic's error shape, and the SDK reports
// them as an *anthropic.Error with the status.
func TestAnthropicBadInput(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 512})
	long := strings.Repeat("lorem ipsum dolor ", 400)
	user := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, body string
		status     int
		typ, msg   string
	}{
		{"no max_tokens", `{"model":"tiny",` + user + `}`, 400, "invalid_request_error", "max_tokens"},
		{"zero max_tokens", `{"model":"tiny","max_tokens":0,` + user + `}`, 400, "invalid_request_error", "max_tokens"},
		{"max_tokens type", `{"model":"tiny","max_tokens":"many",` + user + `}`, 400, "invalid_request_error", "max_tokens"},
		{"no model", `{"max_tokens":4,` + user + `}`, 400, "invalid_request_error", "model"},
		{"unknown model", `{"model":"claude-nope","max_tokens":4,` + user + `}`, 404, "not_found_error", "claude-nope"},
		{"no messages", `{"model":"tiny","max_tokens":4,"messages":[]}`, 400, "invalid_request_error", "messages"},
		{"messages type", `{"model":"tiny","max_tokens":4,"messages":"hi"}`, 400, "invalid_request_error", "messages"},
		{"role", `{"model":"tiny","max_tokens":4,"messages":[{"role":"tool","content":"hi"}]}`, 400, "invalid_request_error", "role"},
		{"content type", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":5}]}`, 400, "invalid_request_error", "content"},
		{"no content", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user"}]}`, 400, "invalid_request_error", "content"},
		{"empty content", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":""}]}`, 400, "invalid_request_error", "non-empty"},
		{"image", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}}]}]}`, 400, "invalid_request_error", "image"},
		{"tool_use without id", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, 400, "invalid_request_error", "tool_use"},
		{"tool_use input", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`, 400, "invalid_request_error", "input"},
		{"tool_result without id", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, 400, "invalid_request_error", "tool_use_id"},
		{"tool_result image", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}]}`, 400, "invalid_request_error", "image"},
		{"text without text", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, 400, "invalid_request_error", "text"},
		{"tool without name", `{"model":"tiny","max_tokens":4,` + user + `,"tools":[{"input_schema":{"type":"object"}}]}`, 400, "invalid_request_error", "tools.0.name"},
		{"tool_choice unknown tool", `{"model":"tiny","max_tokens":4,` + user + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"}}`, 400, "invalid_request_error", "tool_choice"},
		{"thinking budget", `{"model":"tiny","max_tokens":4,` + user + `,"thinking":{"type":"enabled","budget_tokens":10}}`, 400, "invalid_request_error", "budget_tokens"},
		{"cache_control ttl", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1d"}}]}]}`, 400, "invalid_request_error", "ttl"},
		{"unsupported schema keyword", `{"model":"tiny","max_tokens":4,` + user + `,"output_config":{"format":{"type":"json_schema","schema":{"not":{}}}}}`, 400, "invalid_request_error", "output_config"},
		{"system type", `{"model":"tiny","max_tokens":4,` + user + `,"system":7}`, 400, "invalid_request_error", "system"},
		{"system image", `{"model":"tiny","max_tokens":4,` + user + `,"system":[{"type":"image"}]}`, 400, "invalid_request_error", "image"},
		{"temperature", `{"model":"tiny","max_tokens":4,` + user + `,"temperature":1.5}`, 400, "invalid_request_error", "temperature"},
		{"top_p", `{"model":"tiny","max_tokens":4,` + user + `,"top_p":0}`, 400, "invalid_request_error", "top_p"},
		{"stop type", `{"model":"tiny","max_tokens":4,` + user + `,"stop_sequences":"x"}`, 400, "invalid_request_error", "stop_sequences"},
		{"prefill whitespace", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok "}]}`, 400, "invalid_request_error", "trailing whitespace"},
		{"too long", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "invalid_request_error", "context"},
		{"malformed", `{"model":"tiny"`, 400, "invalid_request_error", "JSON"},
		{"invalid UTF-8", "{\"model\":\"tiny\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}", 400, "invalid_request_error", "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", st.URL()+"/v1/messages", strings.NewReader(tc.body))
			req.Header.Set("content-type", "application/json")
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("status %d, body not JSON: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != tc.status || body.Type != "error" || body.Error.Type != tc.typ || !strings.Contains(body.Error.Message, tc.msg) {
				t.Errorf("status %d, %+v; want %d %s containing %q", resp.StatusCode, body, tc.status, tc.typ, tc.msg)
			}
		})
	}

	c := anthropicClient(st)
	_, err := c.Messages.New(context.Background(), anthropicGreedy(0, anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" {
		t.Errorf("SDK error %v", err)
	}
	// The server keeps serving after all of that.
	if msg, err := c.Messages.New(context.Background(), anthropicGreedy(2, anthropic.NewUserMessage(anthropic.NewTextBlock("hi")))); err != nil || msg.Usage.OutputTokens != 2 {
		t.Errorf("after bad input: %v, %+v", err, msg)
	}
}

// A client that hangs up cancels its generation, streamed or not.
func TestAnthropicClientGoneCancels(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 16384}) // seconds of generation, even on a fast machine
	msg := `{"model":"tiny","max_tokens":16000,"temperature":0,"messages":[{"role":"user","content":"hello"}]`
	hangUp(t, st, "/v1/messages", msg+`,"stream":true}`, true)
	hangUp(t, st, "/v1/messages", msg+`}`, false)
}
