package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"superfluid/app"
)

// A smoke test of the harness: a greedy chat completion, whole and
// streamed, over raw HTTP; the streamed text equals the whole one.
func TestChatCompletionWholeAndStreamedAgree(t *testing.T) {
	st := startStack(t, app.Options{})
	body := `{"model":"tiny","messages":[{"role":"user","content":"hello"}],"max_tokens":16,"temperature":0}`
	resp, err := http.Post(st.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var whole struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	json.NewDecoder(resp.Body).Decode(&whole)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(whole.Choices) != 1 || whole.Usage.CompletionTokens != 16 || whole.Choices[0].FinishReason != "length" {
		t.Fatalf("status %d, %+v", resp.StatusCode, whole)
	}
	resp, err = http.Post(st.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(strings.Replace(body, `"temperature":0`, `"temperature":0,"stream":true`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var streamed strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "data: [DONE]" {
			done = true
			break
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line[6:]), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		for _, c := range chunk.Choices {
			streamed.WriteString(c.Delta.Content)
		}
	}
	if !done || streamed.String() != whole.Choices[0].Message.Content {
		t.Fatalf("streamed %q (done=%v), whole %q", streamed.String(), done, whole.Choices[0].Message.Content)
	}
}
