package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/batch"
)

// `superfluid batch` bodies carry structured output like single requests:
// response_format on chats and completions, llama.cpp's json_schema, and a
// schema the converter refuses answered by the 400 it gets alone.
func TestStructuredBatchCLI(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	var schema map[string]any
	if err := json.Unmarshal([]byte(thingSchema), &schema); err != nil {
		t.Fatal(err)
	}
	rf := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "thing", "schema": schema, "strict": true}}
	user := []any{map[string]any{"role": "user", "content": "Describe a thing."}}
	lines := map[string]struct {
		url  string
		body map[string]any
	}{
		"chat":       {batch.ChatCompletions, map[string]any{"model": "tiny", "messages": user, "max_tokens": structuredBudget, "temperature": 0, "response_format": rf}},
		"chat-seed":  {batch.ChatCompletions, map[string]any{"model": "tiny", "messages": user, "max_tokens": structuredBudget, "temperature": 1, "seed": 4, "response_format": rf}},
		"cmpl":       {batch.Completions, map[string]any{"model": "tiny", "prompt": "A thing:", "max_tokens": structuredBudget, "temperature": 0, "response_format": rf}},
		"cmpl-llama": {batch.Completions, map[string]any{"model": "tiny", "prompt": "A thing:", "max_tokens": structuredBudget, "temperature": 0, "json_schema": schema}},
		"refused":    {batch.ChatCompletions, map[string]any{"model": "tiny", "messages": user, "max_tokens": 8, "json_schema": map[string]any{"type": "object", "propertyNames": map[string]any{"maxLength": 2}}}},
	}
	var buf bytes.Buffer
	for id, l := range lines {
		b, _ := json.Marshal(map[string]any{"custom_id": id, "method": "POST", "url": l.url, "body": l.body})
		buf.Write(append(b, '\n'))
	}
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr, err := runBatch(t, "--model", tinyModel(t), "--alias", "tiny", "--threads", "1", "--lanes", "4", "--ctx", "4096", in, "-o", out)
	if err != nil {
		t.Fatalf("batch: %v\n%s", err, stderr)
	}
	recs := readBatchOutput(t, out)
	v := validator(t, thingSchema)
	for id := range lines {
		r := recs[id]
		if id == "refused" {
			if r.Response == nil || r.Response.StatusCode != 400 || !strings.Contains(string(r.Response.Body), "propertyNames") {
				t.Errorf("refused: %+v, want the 400 naming propertyNames", r)
			}
			continue
		}
		if !r.Succeeded() {
			t.Fatalf("%s: %+v", id, r)
		}
		var body struct {
			Choices []struct {
				Text         string                   `json:"text"`
				Message      struct{ Content string } `json:"message"`
				FinishReason string                   `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(r.Response.Body, &body); err != nil || len(body.Choices) != 1 {
			t.Fatalf("%s: %s: %v", id, r.Response.Body, err)
		}
		c := body.Choices[0]
		checkValid(t, fmt.Sprintf("batch %s", id), v, c.Text+c.Message.Content)
		if c.FinishReason != "stop" {
			t.Errorf("batch %s: finish_reason %q, want stop", id, c.FinishReason)
		}
	}
}
