package anthropic

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// qwen3Model is tasktest.ChatMLModel rendering with Qwen3's real template, whose
// tool calls and reasoning the reply package detects.
func qwen3Model(t *testing.T) *task.Model {
	t.Helper()
	src, err := os.ReadFile("/work/shared/templates/Qwen-Qwen3-0.6B.jinja")
	if err != nil {
		t.Skip("the shared templates are not here:", err)
	}
	m := tasktest.ChatMLModel(t, 4096)
	tmpl, err := chat.Parse(string(src), chat.Options{EOS: "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	desc := *m.Desc
	desc.ChatTemplate = string(src)
	m.Desc, m.Chat = &desc, tmpl
	return m
}

// planOf prepares body; keepBilling is --keep-billing-header.
func planOf(t *testing.T, m *task.Model, keepBilling bool, body string) (*prepared, error) {
	t.Helper()
	ctx := tasktest.RequestCtx([]byte(body))
	var req request
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	return testAPI(keepBilling).prepare(ctx, m, &req)
}

const weatherTool = `{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`

// A tool loop's history reaches the template: the assistant's thinking and
// tool_use blocks as its reasoning and calls, the user's tool_result
// blocks (a string, a list of text blocks, an error) as tool messages, in
// order; server tools are skipped; tools make the request an agent's.
func TestAnthropicToolHistory(t *testing.T) {
	m := qwen3Model(t)
	body := `{"model":"tiny","max_tokens":64,"system":"be brief",
	"tools":[` + weatherTool + `,{"type":"web_search_20250305","name":"web_search"}],
	"messages":[
	 {"role":"user","content":"weather in Paris and Rome?"},
	 {"role":"assistant","content":[{"type":"thinking","thinking":"two calls","signature":"x"},{"type":"text","text":"Checking."},
	   {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
	   {"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Rome"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
	   {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"no data"}],"is_error":true},
	   {"type":"text","text":"thanks"}]}]}`
	p, err := planOf(t, m, false, body)
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.Text.Detokenize(p.g.Prompt, true)
	for _, want := range []string{
		`"name": "get_weather"`,
		"Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
		"<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nError: no data\n</tool_response><|im_end|>\n<|im_start|>user\nthanks<|im_end|>",
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "web_search") {
		t.Errorf("the server tool reached the prompt:\n%s", prompt)
	}
	if p.g.Class != sched.Agent {
		t.Errorf("class %v, want agent for a request with tools", p.g.Class)
	}
	if p.g.Grammar == nil || !p.g.Grammar.Lazy {
		t.Errorf("tool_choice auto: grammar %+v, want a lazy one", p.g.Grammar)
	}
}

// tool_choice: any and tool force a call (a grammar from the reasoning's end), none
// renders without the tools; a bad choice is a 400 naming it.
func TestAnthropicToolChoice(t *testing.T) {
	m := qwen3Model(t)
	base := `{"model":"tiny","max_tokens":64,"tools":[` + weatherTool + `],"messages":[{"role":"user","content":"hi"}],"tool_choice":`
	for _, choice := range []string{`{"type":"any"}`, `{"type":"tool","name":"get_weather","disable_parallel_tool_use":true}`} {
		p, err := planOf(t, m, false, base+choice+`}`)
		if err != nil {
			t.Fatalf("%s: %v", choice, err)
		}
		// Qwen3 reasons first: the call is forced from </think> on.
		if g := p.g.Grammar; g == nil || !strings.HasPrefix(g.GBNF, "root ::= sf-calls\n") || len(g.TriggerPatterns) != 1 || g.TriggerPatterns[0] != `<\/think>` {
			t.Errorf("%s: grammar %+v, want a call forced after the reasoning", choice, p.g.Grammar)
		}
	}
	p, err := planOf(t, m, false, base+`{"type":"none"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if p.g.Grammar != nil || strings.Contains(m.Text.Detokenize(p.g.Prompt, true), "get_weather") {
		t.Errorf("tool_choice none: grammar %+v, prompt with the tools", p.g.Grammar)
	}
	for choice, want := range map[string]string{
		`{"type":"tool","name":"nope"}`: "nope",
		`{"type":"tool"}`:               "tool_choice.name",
		`{"type":"sometimes"}`:          "tool_choice.type",
		`"any"`:                         "tool_choice",
	} {
		_, err := planOf(t, m, false, base+choice+`}`)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", choice, err, want)
		}
		if err != nil {
			tasktest.CheckRefusal(t, err)
		}
	}
}

// thinking: enabled and adaptive turn the template's reasoning on,
// disabled off; budget_tokens is checked as Anthropic checks it.
func TestAnthropicThinkingConfig(t *testing.T) {
	m := qwen3Model(t)
	base := `{"model":"tiny","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],"thinking":`
	p, err := planOf(t, m, false, base+`{"type":"disabled"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Text.Detokenize(p.g.Prompt, true); !strings.HasSuffix(got, "<think>\n\n</think>\n\n") {
		t.Errorf("thinking disabled: prompt ends %q", got[max(len(got)-40, 0):])
	}
	for _, on := range []string{`{"type":"enabled","budget_tokens":1024}`, `{"type":"adaptive"}`} {
		p, err := planOf(t, m, false, base+on+`}`)
		if err != nil {
			t.Fatalf("%s: %v", on, err)
		}
		if got := m.Text.Detokenize(p.g.Prompt, true); strings.Contains(got, "</think>") {
			t.Errorf("%s: the reasoning block is closed in the prompt", on)
		}
	}
	for th, want := range map[string]string{
		`{"type":"enabled"}`:                      "budget_tokens: Field required",
		`{"type":"enabled","budget_tokens":1000}`: "greater than or equal to 1024",
		`{"type":"enabled","budget_tokens":4096}`: "max_tokens",
		`{"type":"loud"}`:                         "thinking.type",
	} {
		_, err := planOf(t, m, false, base+th+`}`)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", th, err, want)
		}
	}
}

// Claude Code's billing header, whose cch nonce changes every request, is
// dropped from the first system block unless the server keeps it.
func TestAnthropicBillingHeader(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	body := func(nonce string) string {
		return `{"model":"tiny","max_tokens":4,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.88.a3f; cc_entrypoint=cli; cch=` + nonce + `;"},{"type":"text","text":"You are Claude Code."}],"messages":[{"role":"user","content":"hi"}]}`
	}
	a, err := planOf(t, m, false, body("00001"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := planOf(t, m, false, body("fe3a2"))
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are Claude Code.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	if got := m.Text.Detokenize(a.g.Prompt, true); got != want || m.Text.Detokenize(b.g.Prompt, true) != want {
		t.Errorf("prompt %q, want %q", got, want)
	}
	kept, err := planOf(t, m, true, body("00001"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Text.Detokenize(kept.g.Prompt, true); !strings.Contains(got, "cch=00001;") {
		t.Errorf("--keep-billing-header: prompt %q", got)
	}
	// A string system prompt loses the header's line alone.
	if got := dropBillingHeader("x-anthropic-billing-header: cch=1;\nYou are"); got != "You are" {
		t.Errorf("dropBillingHeader: %q", got)
	}
	if got := dropBillingHeader("You are x-anthropic-billing-header:"); got != "You are x-anthropic-billing-header:" {
		t.Errorf("dropBillingHeader touched a header not at the start: %q", got)
	}
}

// fakePinner records the pins a request asks for.
type fakePinner struct{ pins map[int]time.Duration }

func (f *fakePinner) Pin(prefix []engine.Token, ttl time.Duration) {
	f.pins[len(prefix)] = ttl
}

// cache_control breakpoints mark prompt prefixes: a system block's ends
// with that block, a message block's with it; each is pinned for its TTL.
func TestAnthropicCacheBreakpoints(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	pinner := &fakePinner{pins: map[int]time.Duration{}}
	body := `{"model":"tiny","max_tokens":4,
	 "system":[{"type":"text","text":"S1"},{"type":"text","text":"S2","cache_control":{"type":"ephemeral","ttl":"1h"}}],
	 "messages":[{"role":"user","content":[{"type":"text","text":"u1","cache_control":{"type":"ephemeral"}},{"type":"text","text":"u2"}]}]}`
	p, err := planOf(t, m, false, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.marks) != 2 {
		t.Fatalf("marks %v, want 2", p.marks)
	}
	sys := m.Text.Detokenize(p.g.Prompt[:p.marks[0]], true)
	msg := m.Text.Detokenize(p.g.Prompt[:p.marks[1]], true)
	if !strings.HasPrefix(sys, "<|im_start|>system\nS1\n\nS2") || strings.Contains(sys, "u1") {
		t.Errorf("system mark %q", sys)
	}
	if !strings.HasPrefix(msg, "<|im_start|>system\nS1\n\nS2<|im_end|>\n<|im_start|>user\nu1") || strings.Contains(msg, "u2") {
		t.Errorf("message mark %q", msg)
	}
	pinMarked(pinner, p.g.Prompt, p.breaks, p.marks)
	if pinner.pins[p.marks[0]] != time.Hour || pinner.pins[p.marks[1]] != 5*time.Minute {
		t.Errorf("pins %v for marks %v", pinner.pins, p.marks)
	}
	u := usageOf(len(p.g.Prompt), p.marked(), task.Outcome{})
	if u.CacheCreationInputTokens != p.marks[1] || u.InputTokens != len(p.g.Prompt)-p.marks[1] {
		t.Errorf("usage %+v for a cold prompt of %d, marked %d", u, len(p.g.Prompt), p.marks[1])
	}
	for bad, want := range map[string]string{
		`{"type":"ephemeral","ttl":"2h"}`: "ttl",
		`{"type":"forever"}`:              "cache_control.type",
	} {
		_, err := planOf(t, m, false, `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"u","cache_control":`+bad+`}]}]}`)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bad, err, want)
		}
	}
	five := strings.Repeat(`{"type":"text","text":"u","cache_control":{"type":"ephemeral"}},`, 5)
	if _, err := planOf(t, m, false, `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[`+strings.TrimSuffix(five, ",")+`]}]}`); err == nil || !strings.Contains(err.Error(), "maximum of 4") {
		t.Errorf("five breakpoints: %v", err)
	}
}

// sentEvent is one server-sent event as the block writer sent it.
type sentEvent struct {
	name string
	body map[string]any
}

// The streamed blocks: a block per kind of text, thinking closed by its
// signature, a tool_use block opened with an empty input and filled by
// one input_json_delta, indexes counting up.
func TestAnthropicBlockWriter(t *testing.T) {
	var sent []sentEvent
	w := &blockWriter{send: func(name string, v any) error {
		b, _ := json.Marshal(v)
		var body map[string]any
		json.Unmarshal(b, &body)
		sent = append(sent, sentEvent{name, body})
		return nil
	}}
	err := w.events([]reply.Event{
		{Kind: reply.Reasoning, Text: "let me"}, {Kind: reply.Reasoning, Text: " see"},
		{Kind: reply.Content, Text: "Sure."},
		{Kind: reply.Call, Call: reply.ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}},
		{Kind: reply.Content, Text: "done"},
	})
	if err == nil {
		err = w.finish()
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range sent {
		s := ev.name
		if d, ok := ev.body["delta"].(map[string]any); ok {
			s += ":" + d["type"].(string)
		}
		if cb, ok := ev.body["content_block"].(map[string]any); ok {
			s += ":" + cb["type"].(string)
		}
		got = append(got, s+"@"+asJSON(ev.body["index"]))
	}
	want := []string{
		"content_block_start:thinking@0", "content_block_delta:thinking_delta@0", "content_block_delta:thinking_delta@0",
		"content_block_delta:signature_delta@0", "content_block_stop@0",
		"content_block_start:text@1", "content_block_delta:text_delta@1", "content_block_stop@1",
		"content_block_start:tool_use@2", "content_block_delta:input_json_delta@2", "content_block_stop@2",
		"content_block_start:text@3", "content_block_delta:text_delta@3", "content_block_stop@3",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	start := sent[8].body["content_block"].(map[string]any)
	if id, _ := start["id"].(string); !strings.HasPrefix(id, "toolu_") || start["name"] != "get_weather" || asJSON(start["input"]) != "{}" {
		t.Errorf("tool_use start %v", start)
	}
	if pj := sent[9].body["delta"].(map[string]any)["partial_json"]; pj != `{"city":"Paris"}` {
		t.Errorf("partial_json %v", pj)
	}
	if sig := sent[3].body["delta"].(map[string]any)["signature"]; sig != thinkingSignature("let me see") {
		t.Errorf("signature %v, want the non-streamed one", sig)
	}
	// A turn of nothing still has its text block.
	sent = nil
	w = &blockWriter{send: w.send}
	if err := w.finish(); err != nil || len(sent) != 2 || sent[0].name != "content_block_start" {
		t.Errorf("empty turn: %v %v", err, sent)
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The non-streamed message: the blocks the stream would send, in order.
func TestAnthropicContentOf(t *testing.T) {
	evs := []reply.Event{
		{Kind: reply.Reasoning, Text: "hm"}, {Kind: reply.Reasoning, Text: "m"}, {Kind: reply.Content, Text: "o"}, {Kind: reply.Content, Text: "k"},
		{Kind: reply.Call, Call: reply.ToolCall{Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}, {Kind: reply.Content, Text: "<too"},
	}
	blocks := contentOf(evs, false)
	b, _ := json.Marshal(blocks)
	s := string(b)
	for _, want := range []string{`{"type":"thinking","thinking":"hmm","signature":"` + thinkingSignature("hmm") + `"}`, `{"type":"text","text":"ok"}`, `"name":"f","input":{"a":1}}`, `{"type":"text","text":"\u003ctoo"}`} {
		if !strings.Contains(s, want) {
			t.Errorf("content %s lacks %s", s, want)
		}
	}
	if len(blocks) != 4 || blocks[2].Type != "tool_use" || !strings.HasPrefix(blocks[2].ID, "toolu_") {
		t.Errorf("blocks %s", s)
	}
	if b, _ := json.Marshal(contentOf(nil, false)); string(b) != `[{"type":"text","text":""}]` {
		t.Errorf("empty turn: %s", b)
	}
	if blocks := contentOf([]reply.Event{{Kind: reply.Reasoning, Text: "secret"}}, true); *blocks[0].Thinking != "" || *blocks[0].Signature == "" {
		t.Errorf("display omitted: %+v", blocks[0])
	}
}
