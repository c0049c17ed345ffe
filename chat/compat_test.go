package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// renderWith renders src over one user message with v bound to the JSON
// value raw (as chat_template_kwargs bind it), exactly.
func renderWith(t *testing.T, src, raw string) (string, error) {
	t.Helper()
	tmpl, err := Parse("{% if v is defined %}"+src+"{% endif %}", Options{Now: fixedNow})
	if err != nil {
		return "", err
	}
	return tmpl.Exact(Request{
		Messages: []Message{{Role: RoleUser, Content: "Hi"}},
		Kwargs:   map[string]json.RawMessage{"v": json.RawMessage(raw)},
	})
}

func fixedNow() time.Time { return time.Date(2025, 7, 26, 14, 5, 9, 0, time.UTC) }

// TestToJSON holds tojson to Python's json.dumps; the expected texts were
// printed by Python 3.11.
func TestToJSON(t *testing.T) {
	tests := []struct{ src, v, want string }{
		{"{{ v|tojson }}", `{"a": [1, 2.0, 1e16, 1e-05, 0.1, -3.5, 123456789012345.6], "b": null, "c": true}`,
			`{"a": [1, 2.0, 1e+16, 1e-05, 0.1, -3.5, 123456789012345.6], "b": null, "c": true}`},
		{"{{ v|tojson(ensure_ascii=True) }}", `{"z": "é😀\n\t\"\\\u0001\u007f", "a": {}}`,
			`{"z": "\u00e9\ud83d\ude00\n\t\"\\\u0001\u007f", "a": {}}`},
		{"{{ v | tojson }}", `{"z": "é😀\u007f", "a": []}`, "{\"z\": \"é😀\x7f\", \"a\": []}"},
		{"{{ v|tojson(indent=2) }}", `{"b": [1, {"c": 2}], "a": "x"}`,
			"{\n  \"b\": [\n    1,\n    {\n      \"c\": 2\n    }\n  ],\n  \"a\": \"x\"\n}"},
		{"{{ v|tojson(indent=2, sort_keys=true) }}", `{"b": [1, {"c": 2}], "a": "x"}`,
			"{\n  \"a\": \"x\",\n  \"b\": [\n    1,\n    {\n      \"c\": 2\n    }\n  ]\n}"},
		{"{{ v|tojson(separators=(',', ':')) }}", `{"b": [1, 2]}`, `{"b":[1,2]}`},
		{"{{ v|tojson(indent='\\t') }}", `{"b": [1, 2]}`, "{\n\t\"b\": [\n\t\t1,\n\t\t2\n\t]\n}"},
		{"{{ v|tojson(indent=0) }}", `{"b": [1, 2]}`, "{\n\"b\": [\n1,\n2\n]\n}"},
		{"{{ '|tojson' }}{# v|tojson #}", `1`, "|tojson"}, // strings and comments are not rewritten
		{"{% raw %}{{ v|tojson }}{% endraw %}", `1`, "{{ v|tojson }}"},
	}
	for _, tc := range tests {
		got, err := renderWith(t, tc.src, tc.v)
		if err != nil || got != tc.want {
			t.Errorf("%s over %s:\n got %q (%v)\nwant %q", tc.src, tc.v, got, err, tc.want)
		}
	}
	if _, err := renderWith(t, "{{ nothing|tojson }}", "1"); err == nil {
		t.Error("tojson of an undefined value rendered; json.dumps refuses it")
	}
}

// TestSandboxRefusals: what transformers' ImmutableSandboxedEnvironment and
// Python refuse is refused, with Python's words; what they allow renders.
func TestSandboxRefusals(t *testing.T) {
	refused := []struct{ src, v, msg string }{
		{"{% set _ = v.append(1) %}", `[]`, "access to attribute 'append' of 'list' object is unsafe"},
		{"{{ v.update({'a': 1}) }}", `{}`, "access to attribute 'update' of 'dict' object is unsafe"},
		{"{% set _ = v.pop() %}", `[1]`, "access to attribute 'pop' of 'list' object is unsafe"},
		{"{%- for x in v -%}{{ x }}{%- endfor -%}", `null`, "'NoneType' object is not iterable"},
		{"{% for x in v if x %}{{ x }}{% endfor %}", `3`, "'int' object is not iterable"},
	}
	for _, tc := range refused {
		_, err := renderWith(t, tc.src, tc.v)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s over %s: error %v, want %q", tc.src, tc.v, err, tc.msg)
		}
		var re *RaiseError
		if errors.As(err, &re) {
			t.Errorf("%s: a sandbox refusal came back as the template's raise_exception", tc.src)
		}
	}
	allowed := []struct{ src, v, want string }{
		{"{% for x in v if x > 1 %}{{ x }}{% endfor %}", `[1, 2, 3]`, "23"},
		{"{% for k, x in v.items() %}{{ k }}{{ x }}{% endfor %}", `{"a": 1, "b": 2}`, "a1b2"},
		{"{% for c in v %}{{ c }},{% endfor %}", `"ab"`, "a,b,"},
		{"{% for x in (v + [4])|reverse %}{{ x }}{% endfor %}", `[1, 2]`, "421"},
		{"{{ v.split('.append(')|join('+') }}", `"a.append(b"`, "a+b"},
		{"{% for x in v recursive %}{{ x }}{% endfor %}", `[5]`, "5"},
	}
	for _, tc := range allowed {
		got, err := renderWith(t, tc.src, tc.v)
		if err != nil || got != tc.want {
			t.Errorf("%s over %s: got %q (%v), want %q", tc.src, tc.v, got, err, tc.want)
		}
	}
}

// TestStrftimeNow formats the injected clock as Python's strftime does.
func TestStrftimeNow(t *testing.T) {
	tests := map[string]string{
		"%d %b %Y":                "26 Jul 2025",
		"%B %d, %Y":               "July 26, 2025",
		"%Y-%m-%d":                "2025-07-26",
		"%A %a %I:%M %p %j %y %e": "Saturday Sat 02:05 PM 207 25 26",
		"%H:%M:%S %%":             "14:05:09 %",
	}
	for format, want := range tests {
		got, err := renderWith(t, "{{ strftime_now('"+format+"') }}", "1")
		if err != nil || got != want {
			t.Errorf("strftime_now(%q) = %q (%v), want %q", format, got, err, want)
		}
	}
}

// TestRequestChecks: tool calls and tools must be JSON objects, and
// template variables cannot replace the ones Render sets.
func TestRequestChecks(t *testing.T) {
	tmpl := mustParse(t, "{{ messages|length }}{{ tools|length if tools else 'none' }}{{ bos_token }}", Options{BOS: "<s>"})
	user := Message{Role: RoleUser, Content: "Hi"}
	call := Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`"{\"a\": 1}"`)}}}
	if _, err := tmpl.Exact(Request{Messages: []Message{user, call}}); !errors.Is(err, ErrBadArguments) {
		t.Errorf("arguments as a JSON string: %v, want ErrBadArguments", err)
	}
	if _, err := tmpl.Exact(Request{Messages: []Message{user}, Tools: []json.RawMessage{json.RawMessage(`[1]`)}}); !errors.Is(err, ErrBadTool) {
		t.Errorf("a tool that is a list: %v, want ErrBadTool", err)
	}
	got, err := tmpl.Exact(Request{Messages: []Message{user}, Kwargs: map[string]json.RawMessage{
		"messages": json.RawMessage(`[1, 2, 3]`), "tools": json.RawMessage(`[1]`), "bos_token": json.RawMessage(`"X"`)}})
	if err != nil || got != "1none<s>" {
		t.Errorf("kwargs replaced render variables: %q (%v), want %q", got, err, "1none<s>")
	}
}

// TestMessageFields: the optional message fields reach the template under
// transformers' names, and only when set.
func TestMessageFields(t *testing.T) {
	tmpl := mustParse(t, "{% for m in messages %}{{ m.keys()|list|join(',') }};{% endfor %}"+
		"{{ messages[1].reasoning_content }}|{{ messages[1].tool_calls[0].function.arguments.city }}|{{ messages[2].tool_call_id }}", Options{})
	got, err := tmpl.Exact(Request{Messages: []Message{
		{Role: RoleUser, Content: "Weather?"},
		{Role: RoleAssistant, ReasoningContent: "Ask the tool.", ToolCalls: []ToolCall{{ID: "c1", Name: "w", Arguments: json.RawMessage(`{"city": "Oslo"}`)}}},
		{Role: RoleTool, Content: "-3", ToolCallID: "c1", Name: "w"},
	}})
	want := "role,content;role,content,reasoning_content,tool_calls;role,content,tool_call_id,name;Ask the tool.|Oslo|c1"
	if err != nil || got != want {
		t.Errorf("got %q (%v)\nwant %q", got, err, want)
	}
}
