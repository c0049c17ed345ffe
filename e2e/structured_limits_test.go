package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"superfluid/app"
)

// The hostile grammars and schemas of issue 21 on the real server: each
// is answered with a 400 in the API's own shape naming what it passed (on
// main they held a request for 25-35 s and gigabytes), and the server
// answers a normal request after them.
func TestStructuredOutputLimits(t *testing.T) {
	st := startStack(t, app.Options{})
	deep := "root ::= " + strings.Repeat("(", 60000) + `"a"` + strings.Repeat(")", 60000)
	deepJSON, _ := json.Marshal(deep)
	var a, b []string
	for i := 0; i < 20000; i++ {
		a = append(a, strconv.Itoa(i))
		b = append(b, strconv.Itoa(20000+i))
	}
	enums := `{"allOf":[{"enum":[` + strings.Join(a, ",") + `]},{"enum":[` + strings.Join(b, ",") + `]}]}`
	deepPattern := func(n int) string {
		return `{"type":"string","pattern":"` + strings.Repeat("(", n) + "a" + strings.Repeat(")", n) + `"}`
	}
	pattern := deepPattern(20000)
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		name, path, body string
		want             []string // in the message
	}{
		{"llama.cpp deep grammar", "/completion", `{"prompt":"x","grammar":` + string(deepJSON) + `}`, []string{"grammar", "nesting", "128"}},
		{"openai deep grammar", "/v1/chat/completions", `{"model":"tiny",` + user + `,"grammar":` + string(deepJSON) + `}`, []string{"grammar", "nesting", "128"}},
		{"openai enum intersection", "/v1/chat/completions", `{"model":"tiny",` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + enums + `}}}`, []string{"response_format.json_schema.schema", "admits no value"}},
		{"llama.cpp enum intersection", "/completion", `{"prompt":"x","json_schema":` + enums + `}`, []string{"json_schema", "admits no value"}},
		{"ollama enum intersection", "/api/chat", `{"model":"tiny",` + user + `,"format":` + enums + `}`, []string{"format", "admits no value"}},
		{"anthropic enum intersection", "/v1/messages", `{"model":"tiny","max_tokens":8,` + user + `,"output_config":{"format":{"type":"json_schema","schema":` + enums + `}}}`, []string{"output_config.format.schema", "admits no value"}},
		{"ollama deep pattern", "/api/generate", `{"model":"tiny","prompt":"x","format":` + pattern + `}`, []string{"format", "pattern", "nesting"}},
		{"openai tool deep pattern", "/v1/chat/completions", `{"model":"tiny",` + user + `,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"s":` + deepPattern(200) + `}}}}]}`, []string{"tools", "pattern", "nesting"}},
	} {
		raw := postRaw(t, st, c.path, c.body, 400)
		msg := errorMessage(t, c.path, raw)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q should name %s", c.name, msg, w)
			}
		}
	}
	// The server still answers, grammar and all.
	var out struct{ Content string }
	postJSONTo(t, st, "/completion", json.RawMessage(`{"prompt":"x","n_predict":4,"temperature":0,"grammar":"root ::= [a-c]{1,4}"}`), 200, &out)
	if out.Content == "" || strings.Trim(out.Content, "abc") != "" {
		t.Errorf("a normal grammar after the hostile ones: %q", out.Content)
	}
}

// A chain of 80,000 rules (under a megabyte) is parsed in linear time and
// refused: llama.cpp's matcher would expand it one native stack frame per
// rule, which overflowed the stack and killed the server.
func TestStructuredRuleChain(t *testing.T) {
	st := startStack(t, app.Options{})
	name := func(i int) string { return strconv.FormatInt(int64(i), 36) } // short, to stay under a megabyte
	var g strings.Builder
	g.WriteString("root::=0 \"x\"\n")
	for i := 0; i < 80000; i++ {
		fmt.Fprintf(&g, "%s::=%s\n", name(i), name(i+1))
	}
	fmt.Fprintf(&g, "%s::=\"\"\n", name(80000))
	grammarJSON, _ := json.Marshal(g.String())
	for _, path := range []string{"/completion", "/v1/completions"} {
		body := `{"model":"tiny","prompt":"x","n_predict":2,"grammar":` + string(grammarJSON) + `}`
		msg := errorMessage(t, path, postRaw(t, st, path, body, 400))
		if !strings.Contains(msg, "grammar") || !strings.Contains(msg, "depth of rules") {
			t.Errorf("%s: %q should name the grammar and the bound", path, msg)
		}
	}
	postJSONTo(t, st, "/completion", json.RawMessage(`{"prompt":"x","n_predict":2,"temperature":0}`), 200, nil)
}
