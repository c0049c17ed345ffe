package command

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"superfluid/app"
	"superfluid/synth"
)

// TestRunChatPromptsAsServe holds `run --chat` to serve's rendering: the
// same user message gives the same prompt length on the command line as in
// a /v1/chat/completions request to a real server over the same model. It
// uses the synthetic model's ChatML template and, when the shared fixture is
// there, Qwen2.5-Instruct's real template (which adds a default system
// prompt llama.cpp's built-in matcher leaves out).
func TestRunChatPromptsAsServe(t *testing.T) {
	models := map[string]string{"chatml": testModel}
	if vocab := "../../shared/models/ggml-vocab-qwen2.5-instruct.gguf"; fileExists(vocab) {
		path := filepath.Join(t.TempDir(), "qwen.gguf")
		shape, _ := synth.ShapeByName("tiny")
		if err := synth.Write(path, synth.Options{Shape: shape, VocabFile: vocab, Type: "f16", Seed: 3}); err != nil {
			t.Fatal(err)
		}
		models["qwen2.5-instruct"] = path
	} else {
		t.Logf("skipping the qwen2.5-instruct case: %s is absent", vocab)
	}
	const user = "Hello there, how are you?"
	for name, path := range models {
		t.Run(name, func(t *testing.T) {
			_, errOut, err := runCLI("run", "--model", path, "--prompt", user, "--chat", "--max-tokens", "1", "--threads", "1")
			if err != nil {
				t.Fatalf("run --chat: %v (%s)", err, errOut)
			}
			m := regexp.MustCompile(`prompt: (\d+) tokens`).FindStringSubmatch(errOut)
			if m == nil {
				t.Fatalf("no prompt count in %q", errOut)
			}
			runTokens, _ := strconv.Atoi(m[1])
			if serveTokens := servePromptTokens(t, path, user); runTokens != serveTokens {
				t.Errorf("run --chat prompts %d tokens, serve %d", runTokens, serveTokens)
			}
		})
	}
}

// servePromptTokens starts a server on path and reports the prompt tokens
// of a chat request holding one user message.
func servePromptTokens(t *testing.T, path, user string) int {
	t.Helper()
	st, err := app.Start("127.0.0.1:0", app.Options{ModelPath: path, Alias: "m", Threads: 1, Ctx: 1024, Lanes: 1})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer st.Close()
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 1,
		"messages": []map[string]string{{"role": "user", "content": user}}})
	resp, err := http.Post(st.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("chat completion: status %d, %v", resp.StatusCode, err)
	}
	return out.Usage.PromptTokens
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
