package http

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// How each chat API words a parsed reply: a scripted toy model writes
// what Qwen3 writes — reasoning, then a call — through Qwen3's real
// template, and each API must return the reasoning, the content and the
// call in its own fields, streamed and whole, with no marker in content.

const qwen3Reply = "<think>\nThe user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"

const oaiWeatherTool = `[{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

func qwen3Toy(t *testing.T, script string) *toyStack {
	src, err := os.ReadFile("../../shared/templates/Qwen-Qwen3-0.6B.jinja")
	if err != nil {
		t.Skipf("../shared/templates is absent: %v", err)
	}
	return startToy(t, toyOptions{script: script, template: string(src)})
}

func TestOpenAIChatParsesTheTurn(t *testing.T) {
	ts := qwen3Toy(t, qwen3Reply)
	body := `{"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + oaiWeatherTool + `}`
	status, raw := ts.post(t, "/v1/chat/completions", body)
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content          *string `json:"content"`
				ReasoningContent string  `json:"reasoning_content"`
				ToolCalls        []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(raw), &resp); err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if msg.ReasoningContent != "The user wants the weather." || msg.Content == nil || *msg.Content != "Let me check." {
		t.Errorf("reasoning %q content %v", msg.ReasoningContent, msg.Content)
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" || msg.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` ||
		!strings.HasPrefix(msg.ToolCalls[0].ID, "call_") || msg.ToolCalls[0].Type != "function" {
		t.Errorf("calls %+v", msg.ToolCalls)
	}
	if resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finish %q", resp.Choices[0].FinishReason)
	}

	// Streamed: reasoning and content deltas, then the call's head (id,
	// name, empty arguments) and its arguments, then the finish.
	status, raw = ts.post(t, "/v1/chat/completions", strings.Replace(body, `{"messages"`, `{"stream":true,"messages"`, 1))
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	var reasoning, content, args, name, id, finish string
	sc := bufio.NewScanner(strings.NewReader(raw))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    *int   `json:"index"`
						ID       string `json:"id"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		d := chunk.Choices[0].Delta
		if d.Content != nil {
			content += *d.Content
		}
		if d.ReasoningContent != nil {
			reasoning += *d.ReasoningContent
		}
		for _, c := range d.ToolCalls {
			if c.Index == nil || *c.Index != 0 {
				t.Errorf("a call fragment without index 0: %s", line)
			}
			id, name, args = id+c.ID, name+c.Function.Name, args+c.Function.Arguments
		}
		if f := chunk.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if reasoning != "The user wants the weather." || content != "Let me check." || name != "get_weather" || args != `{"city":"Paris"}` || id == "" || finish != "tool_calls" {
		t.Errorf("streamed: reasoning %q content %q call %s %s(%s) finish %q", reasoning, content, id, name, args, finish)
	}
}

func TestOllamaChatParsesTheTurn(t *testing.T) {
	ts := qwen3Toy(t, qwen3Reply)
	body := `{"model":"toy","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + oaiWeatherTool + `,"think":true`
	type message struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			Function struct {
				Index     int             `json:"index"`
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	var whole struct {
		Message    message `json:"message"`
		DoneReason string  `json:"done_reason"`
	}
	status, raw := ts.post(t, "/api/chat", body+`,"stream":false}`)
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	if err := json.Unmarshal([]byte(raw), &whole); err != nil {
		t.Fatal(err)
	}
	m := whole.Message
	if m.Thinking != "The user wants the weather." || m.Content != "Let me check." || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Name != "get_weather" || string(m.ToolCalls[0].Function.Arguments) != `{"city":"Paris"}` {
		t.Errorf("whole: %s", raw)
	}
	status, raw = ts.post(t, "/api/chat", body+`}`)
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	var streamed message
	for _, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		var part struct {
			Message message `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &part); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		streamed.Content += part.Message.Content
		streamed.Thinking += part.Message.Thinking
		streamed.ToolCalls = append(streamed.ToolCalls, part.Message.ToolCalls...)
	}
	if streamed.Thinking != m.Thinking || streamed.Content != m.Content || len(streamed.ToolCalls) != 1 ||
		string(streamed.ToolCalls[0].Function.Arguments) != `{"city":"Paris"}` {
		t.Errorf("streamed: %+v", streamed)
	}
	// The template supports tools and thinking: /api/show says so.
	status, raw = ts.post(t, "/api/show", `{"model":"toy"}`)
	if status != 200 || !strings.Contains(raw, `"tools"`) || !strings.Contains(raw, `"thinking"`) {
		t.Errorf("show: %d %s", status, raw)
	}
}

// A call the model botched is content, with the finish a plain stop —
// never a 500, never an aborted stream.
func TestMalformedCallIsContent(t *testing.T) {
	bad := "<tool_call>\n{\"name\": get_weather}\n</tool_call>"
	ts := qwen3Toy(t, bad)
	body := `{"messages":[{"role":"user","content":"Weather?"}],"tools":` + oaiWeatherTool + `}`
	status, raw := ts.post(t, "/v1/chat/completions", body)
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content   string            `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(raw), &resp); err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.Message.Content != bad || len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "stop" {
		t.Errorf("got %s", raw)
	}
	status, raw = ts.post(t, "/v1/chat/completions", strings.Replace(body, `{"messages"`, `{"stream":true,"messages"`, 1))
	if status != 200 || !strings.HasSuffix(strings.TrimSpace(raw), "[DONE]") || !strings.Contains(raw, `get_weather}`) {
		t.Errorf("stream: %d %s", status, raw)
	}
}
