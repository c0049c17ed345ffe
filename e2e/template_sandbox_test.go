package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/app"
	"superfluid/gguf"
	"superfluid/synth"
)

// A chat template given with --chat-template-file that crosses a sandbox
// bound used to kill the server at start: endless macro recursion with a
// fatal stack overflow, a ten-billion range by exhausting memory. Now the
// template is refused at load and the model served without it: the stack
// is up, every chat route answers 400 in its API's shape naming the bound,
// and the completion endpoints still generate.
func TestChatTemplateFileBeyondABoundIsRefusedAtLoad(t *testing.T) {
	for _, tc := range []struct{ name, src, bound string }{
		{"recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursion depth"},
		{"range", "{% for i in range(10000000000) %}{{ i }}{% endfor %}", "range length"},
		{"repetition", "{{ 'a' * 1000000000000 }}", "value size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), tc.name+".jinja")
			if err := os.WriteFile(file, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			st := startStack(t, app.Options{ChatTemplateFile: file})
			msgs := []map[string]any{{"role": "user", "content": "Hi"}}
			for path, body := range map[string]any{
				"/v1/chat/completions": map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 2},
				"/v1/messages":         map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 2},
				"/api/chat":            map[string]any{"model": "tiny", "messages": msgs, "stream": false},
				"/apply-template":      map[string]any{"messages": msgs},
			} {
				raw := postJSONTo(t, st, path, body, 400, nil)
				msg := errorMessage(t, path, raw)
				for _, want := range []string{"refused at load", file, tc.bound} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: %q does not say %q", path, msg, want)
					}
				}
			}
			var out struct {
				Content string `json:"content"`
				Tokens  int    `json:"tokens_predicted"`
			}
			postJSONTo(t, st, "/completion", map[string]any{"prompt": "Hello", "n_predict": 3}, 200, &out)
			if out.Tokens == 0 {
				t.Fatalf("/completion generated nothing")
			}
		})
	}
}

// The same holds for the template a model file carries (a pulled model's
// is loaded the same way): the model loads without it, and chat requests
// are answered 400 with the reason.
func TestGGUFChatTemplateBeyondABoundIsRefusedAtLoad(t *testing.T) {
	tmpl, err := gguf.ValueOf("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")
	if err != nil {
		t.Fatal(err)
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "recursive-template.gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: 11, Metadata: []gguf.KV{{Key: "tokenizer.chat_template", Value: tmpl}}}); err != nil {
		t.Fatal(err)
	}
	st := startStack(t, app.Options{ModelPath: path})
	raw := postJSONTo(t, st, "/v1/chat/completions", map[string]any{"model": "tiny", "messages": []map[string]any{{"role": "user", "content": "Hi"}}}, 400, nil)
	msg := errorMessage(t, "/v1/chat/completions", raw)
	for _, want := range []string{"the model's chat template was refused at load", "recursion depth"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	postJSONTo(t, st, "/completion", map[string]any{"prompt": "Hello", "n_predict": 3}, 200, nil)
}
