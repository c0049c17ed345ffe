package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"superfluid/app"
)

// A bad schema, an unsupported keyword and an unparsable grammar are a 400
// in each API's own error shape, naming the field (and the keyword and its
// place), on the real server.
func TestStructuredOutputErrors(t *testing.T) {
	st := startStack(t, app.Options{})
	unsupported := `{"type":"object","properties":{"a":{"type":"string","maxLength":3,"patternProperties":{}}}}`
	badSchema := `{"type":"object","required":"a"}`
	badGrammar := `"root ::= \"a\" (\"b\""`
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		name, path, body string
		want             []string // in the message
	}{
		{"openai keyword", "/v1/chat/completions", `{"model":"tiny",` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + unsupported + `}}}`, []string{"response_format.json_schema.schema", `"patternProperties"`, "#/properties/a"}},
		{"openai schema", "/v1/chat/completions", `{"model":"tiny",` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + badSchema + `}}}`, []string{"response_format.json_schema.schema", "required"}},
		{"openai type", "/v1/completions", `{"model":"tiny","prompt":"x","response_format":{"type":"xml"}}`, []string{"response_format.type"}},
		{"openai grammar", "/v1/chat/completions", `{"model":"tiny",` + user + `,"grammar":` + badGrammar + `}`, []string{"grammar", "line 1"}},
		{"llama.cpp keyword", "/completion", `{"prompt":"x","json_schema":` + unsupported + `}`, []string{"json_schema", `"patternProperties"`}},
		{"llama.cpp grammar", "/completion", `{"prompt":"x","grammar":` + badGrammar + `}`, []string{"grammar", "line 1"}},
		{"llama.cpp infill grammar", "/infill", `{"input_prefix":"a","input_suffix":"b","grammar":"root ::= nowhere"}`, []string{"grammar", "nowhere"}},
		{"llama.cpp triggers", "/completion", `{"prompt":"x","grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":3,"value":"^a$"}]}`, []string{"grammar_triggers"}},
		{"ollama keyword", "/api/chat", `{"model":"tiny",` + user + `,"format":` + unsupported + `}`, []string{"format", `"patternProperties"`}},
		{"ollama format", "/api/generate", `{"model":"tiny","prompt":"x","format":"yaml"}`, []string{"format"}},
		{"anthropic keyword", "/v1/messages", `{"model":"tiny","max_tokens":8,` + user + `,"output_config":{"format":{"type":"json_schema","schema":` + unsupported + `}}}`, []string{"output_config.format.schema", `"patternProperties"`}},
		{"anthropic schema", "/v1/messages", `{"model":"tiny","max_tokens":8,` + user + `,"output_format":{"type":"json_schema","schema":` + badSchema + `}}`, []string{"output_format.schema"}},
	} {
		raw := postRaw(t, st, c.path, c.body, 400)
		msg := errorMessage(t, c.path, raw)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q should name %s", c.name, msg, w)
			}
		}
	}
}

// postRaw posts body as it is and returns the answer, failing on any
// other status than want.
func postRaw(t *testing.T, st *app.Stack, path, body string, want int) []byte {
	t.Helper()
	return postJSONTo(t, st, path, json.RawMessage(body), want, nil)
}

// errorMessage reads the message of an error body in the shape of the API
// path belongs to, failing when the shape is not that API's.
func errorMessage(t *testing.T, path string, raw []byte) string {
	t.Helper()
	var v struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %s: %v", path, raw, err)
	}
	var inner struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	switch {
	case strings.HasPrefix(path, "/api/"):
		var msg string
		if json.Unmarshal(v.Error, &msg) != nil || msg == "" {
			t.Fatalf("%s: %s is not Ollama's {\"error\": \"…\"}", path, raw)
		}
		return msg
	case strings.HasPrefix(path, "/v1/messages"):
		if v.Type != "error" {
			t.Fatalf("%s: %s is not Anthropic's error shape", path, raw)
		}
	}
	if json.Unmarshal(v.Error, &inner) != nil || inner.Message == "" || inner.Type != "invalid_request_error" {
		t.Fatalf("%s: %s: want error.message and type invalid_request_error", path, raw)
	}
	if !strings.HasPrefix(path, "/v1/") {
		if code, ok := inner.Code.(float64); !ok || code != 400 {
			t.Fatalf("%s: %s: llama.cpp's code should be the status", path, raw)
		}
	}
	return inner.Message
}
