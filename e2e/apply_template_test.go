package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/app"
)

// The server's rendering is the reference's: a real template given with
// --chat-template-file (app.Options.ChatTemplateFile, what the flag sets)
// renders the golden conversations through /apply-template byte for byte
// as transformers does (chat/testdata/golden), with the tools and tool
// calls an OpenAI client sends (arguments as JSON strings).
func TestApplyTemplateMatchesReference(t *testing.T) {
	const name = "Qwen3-Coder"
	file := filepath.Join("..", "..", "shared", "templates", name+".jinja")
	if _, err := os.Stat(file); err != nil {
		t.Skipf("../shared/templates absent (%v): the reference templates are not here", err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var convs struct {
		Tools         []json.RawMessage `json:"tools"`
		Conversations map[string]struct {
			Tools               bool             `json:"tools"`
			AddGenerationPrompt bool             `json:"add_generation_prompt"`
			Messages            []map[string]any `json:"messages"`
		} `json:"conversations"`
	}
	if err := json.Unmarshal(raw, &convs); err != nil {
		t.Fatal(err)
	}
	st := startStack(t, app.Options{ChatTemplateFile: file})
	for _, conv := range []string{"plain", "tool", "tool2"} {
		t.Run(conv, func(t *testing.T) {
			c := convs.Conversations[conv]
			golden, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "golden", name+"."+conv+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			body := map[string]any{"messages": openaiMessages(t, c.Messages), "add_generation_prompt": c.AddGenerationPrompt}
			if c.Tools {
				body["tools"] = convs.Tools
			}
			var out struct{ Prompt string }
			postJSONTo(t, st, "/apply-template", body, 200, &out)
			if out.Prompt != string(golden) {
				t.Fatalf("prompt differs from the reference\ngot:\n%s\nwant:\n%s", out.Prompt, golden)
			}
		})
	}
}

// openaiMessages turns the conversations' messages into what an OpenAI
// client sends: tool-call arguments as JSON strings.
func openaiMessages(t *testing.T, msgs []map[string]any) []map[string]any {
	t.Helper()
	for _, m := range msgs {
		calls, _ := m["tool_calls"].([]any)
		for _, c := range calls {
			fn := c.(map[string]any)["function"].(map[string]any)
			b, err := json.Marshal(fn["arguments"])
			if err != nil {
				t.Fatal(err)
			}
			fn["arguments"] = string(b)
		}
	}
	return msgs
}

// A template file that does not parse stops the start, naming the file.
func TestChatTemplateFileThatDoesNotParse(t *testing.T) {
	file := filepath.Join(t.TempDir(), "broken.jinja")
	if err := os.WriteFile(file, []byte("{% for m in messages %}{{ m.content }"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := app.Start("127.0.0.1:0", app.Options{ModelPath: tinyModel(t), Threads: 1, Ctx: 1024, ChatTemplateFile: file})
	if err == nil {
		st.Close()
		t.Fatal("a template that does not parse was accepted")
	}
	if !strings.Contains(err.Error(), file) {
		t.Fatalf("the error does not name the file: %v", err)
	}
}
