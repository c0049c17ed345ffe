package http

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/task"
)

// toolTemplate shows everything a tool-calling template reads: the tools,
// each call's arguments as an object (a field of it printed on its own,
// which only an object has), the call a tool turn answers, and refuses a
// system turn saying "refuse" with raise_exception.
const toolTemplate = `{%- if tools %}TOOLS {{ tools | tojson }}
{% endif %}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}[{{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }} city={{ c.function.arguments.city }}]{% endfor %}{% endif %}{% if m.tool_call_id %}(answers {{ m.tool_call_id }} {{ m.name }}){% endif %}{% if m.role == 'system' and m.content == 'refuse' %}{{ raise_exception('no system turn may say refuse') }}{% endif %}{{ "\n" }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`

// startToolToy is the toy stack with toolTemplate as the model's template.
func startToolToy(t *testing.T) *toyStack {
	t.Helper()
	ts := startToy(t, toyOptions{})
	tmpl, err := chat.Parse(toolTemplate, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := *ts.srv.registry().(singleModel).m
	m.Chat = tmpl
	ts.srv.SetModel(&m)
	return ts
}

// toolConversation is a conversation whose earlier turns used a tool, as
// an OpenAI client sends it: arguments a JSON string.
const toolConversation = `[
	{"role": "user", "content": "Weather in Paris?"},
	{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
	{"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"}
]`

const toolRendering = "<user>Weather in Paris?\n" +
	`<assistant>[call_1 get_weather {"city": "Paris"} city=Paris]` + "\n" +
	"<tool>sunny(answers call_1 get_weather)\n"

func applyTemplate(t *testing.T, ts *toyStack, body string) (int, string) {
	t.Helper()
	status, resp := ts.post(t, "/apply-template", body)
	if status != 200 {
		return status, resp
	}
	var out struct{ Prompt *string }
	if err := json.Unmarshal([]byte(resp), &out); err != nil || out.Prompt == nil {
		t.Fatalf("answer %s is not {\"prompt\": …}: %v", resp, err)
	}
	return status, *out.Prompt
}

func TestApplyTemplatePlain(t *testing.T) {
	ts := startToy(t, toyOptions{}) // ChatML
	status, prompt := applyTemplate(t, ts, `{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}`)
	if want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; status != 200 || prompt != want {
		t.Fatalf("%d %q, want %q", status, prompt, want)
	}
	status, prompt = applyTemplate(t, ts, `{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false}`)
	if want := "<|im_start|>user\nHi<|im_end|>\n"; status != 200 || prompt != want {
		t.Fatalf("without the generation prompt: %d %q, want %q", status, prompt, want)
	}
}

func TestApplyTemplateTools(t *testing.T) {
	ts := startToolToy(t)
	tool := `{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}`
	status, prompt := applyTemplate(t, ts, `{"messages": `+toolConversation+`, "tools": [`+tool+`]}`)
	want := `TOOLS [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]` + "\n" + toolRendering + "<assistant>"
	if status != 200 || prompt != want {
		t.Fatalf("%d %q\nwant %q", status, prompt, want)
	}
	// Arguments sent as an object (some clients do) render the same.
	asObject := strings.Replace(toolConversation, `"{\"city\": \"Paris\"}"`, `{"city": "Paris"}`, 1)
	status, prompt = applyTemplate(t, ts, `{"messages": `+asObject+`, "add_generation_prompt": false}`)
	if status != 200 || prompt != toolRendering {
		t.Fatalf("arguments as an object: %d %q\nwant %q", status, prompt, toolRendering)
	}
}

// What the template cannot be given, or refuses, is a 400 saying why.
func TestApplyTemplateRefusals(t *testing.T) {
	ts := startToolToy(t)
	withArgs := func(args string) string {
		return `{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": ` + args + `}}]}]}`
	}
	for _, tc := range []struct{ name, body, want string }{
		{"arguments not JSON", withArgs(`"{city: Paris}"`), "messages[1].tool_calls[0].function.arguments"},
		{"arguments a JSON list", withArgs(`"[1, 2]"`), "messages[1].tool_calls[0].function.arguments"},
		{"arguments a number", withArgs(`5`), "messages[1].tool_calls[0].function.arguments"},
		{"arguments missing", withArgs(`null`), "messages[1].tool_calls[0].function.arguments"},
		{"tool calls on a user turn", `{"messages": [{"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]}`, "messages[0].tool_calls"},
		{"a tool that is not an object", `{"messages": [{"role": "user", "content": "x"}], "tools": ["get_weather"]}`, "tools[0]"},
		{"no messages", `{"messages": []}`, "messages"},
		{"template refusal", `{"messages": [{"role": "system", "content": "refuse"}, {"role": "user", "content": "x"}]}`, "no system turn may say refuse"},
	} {
		status, body := ts.post(t, "/apply-template", tc.body)
		if status != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.name, status, body, tc.want)
		}
	}
}

// The generation endpoints render a conversation whose earlier turns used
// tools through the same code (the prompt /apply-template shows), and
// still refuse a request that offers tools.
func TestChatHistoryWithToolCalls(t *testing.T) {
	ts := startToolToy(t)
	var mu sync.Mutex
	var prompts []string // what each generation was prompted with
	setTokenHook(t, func(g *task.Spec, n int) {
		if n == 1 {
			mu.Lock()
			prompts = append(prompts, ts.text.Detokenize(g.Prompt, true))
			mu.Unlock()
		}
	})
	_, shown := applyTemplate(t, ts, `{"messages": `+toolConversation+`}`)
	if shown != toolRendering+"<assistant>" {
		t.Fatalf("apply-template: %q", shown)
	}
	status, body := ts.post(t, "/v1/chat/completions", `{"messages": `+toolConversation+`, "max_tokens": 2}`)
	if status != 200 {
		t.Fatalf("chat with tool history: %d %s", status, body)
	}
	ollamaHistory := `[{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "tool_calls": [{"id": "call_1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
		{"role": "tool", "tool_name": "get_weather", "content": "sunny"}]`
	status, body = ts.post(t, "/api/chat", `{"model": "toy", "stream": false, "messages": `+ollamaHistory+`, "options": {"num_predict": 2}}`)
	if status != 200 {
		t.Fatalf("ollama chat with tool history: %d %s", status, body)
	}
	ts.waitIdle(t)
	mu.Lock()
	// Ollama's tool turns name the tool but not the call they answer.
	ollamaWant := strings.Replace(shown, "(answers call_1 get_weather)", "", 1)
	if len(prompts) != 2 || prompts[0] != shown || prompts[1] != ollamaWant {
		t.Errorf("prompted with %q, want %q and %q", prompts, shown, ollamaWant)
	}
	mu.Unlock()
}

// OpenAI sends arguments as a string holding an object; "" is what some
// clients send for a call that takes none.
func TestCallArguments(t *testing.T) {
	for raw, want := range map[string]string{
		`"{\"a\": 1}"`: `{"a": 1}`,
		`{"a": 1}`:     `{"a": 1}`,
		`""`:           `{}`,
		`"  "`:         `{}`,
	} {
		got, err := wire.CallArguments(json.RawMessage(raw))
		if err != nil || string(got) != want {
			t.Errorf("%s: %s, %v; want %s", raw, got, err, want)
		}
	}
	for _, raw := range []string{`"[1]"`, `5`, `null`, `"{"`, ``} {
		if got, err := wire.CallArguments(json.RawMessage(raw)); err == nil {
			t.Errorf("%s: accepted as %s", raw, got)
		}
	}
}
