package responses

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

func rawItems(t *testing.T, s string) []json.RawMessage {
	t.Helper()
	items, err := respInputItems(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func index(i int) string { return fmt.Sprintf("input[%d]", i) }

func TestRespConversationJoinsAnAssistantTurn(t *testing.T) {
	items := rawItems(t, `[
		{"role": "developer", "content": "be brief"},
		{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather in "}, {"type": "input_text", "text": "Oslo?"}]},
		{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "need the tool"}]},
		{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
		{"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
		{"type": "function_call", "call_id": "call_b", "name": "time", "arguments": ""},
		{"type": "function_call_output", "call_id": "call_a", "output": "7 C"},
		{"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "noon"}]}
	]`)
	msgs, err := respConversation(items, index, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "weather in Oslo?"},
		{Role: "assistant", Content: "Checking.", ReasoningContent: "need the tool", ToolCalls: []chat.ToolCall{
			{ID: "call_a", Name: "weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
			{ID: "call_b", Name: "time", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", Content: "7 C", ToolCallID: "call_a", Name: "weather"},
		{Role: "tool", Content: "noon", ToolCallID: "call_b", Name: "time"},
	}
	got, _ := json.Marshal(msgs)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Fatalf("messages:\n got %s\nwant %s", got, exp)
	}
}

func TestRespInputStringIsOneUserMessage(t *testing.T) {
	msgs, err := respConversation(rawItems(t, `"hi"`), index, nil)
	if err != nil || len(msgs) != 1 || msgs[0].Role != "user" || msgs[0].Content != "hi" {
		t.Fatalf("got %+v, %v", msgs, err)
	}
}

// A response's own output, read back as input (previous_response_id),
// gives the assistant turn it was.
func TestRespOutputReadsBackAsInput(t *testing.T) {
	obj := respObject{Output: []respItemOut{
		{ID: "rs_1", Type: "reasoning", Status: "completed", Content: []respPartOut{reasoningText("hmm")}},
		{ID: "fc_1", Type: "function_call", Status: "completed", CallID: "call_1", Name: "f", Arguments: `{"x":1}`},
	}}
	b, _ := json.Marshal(obj.Output)
	items := rawItems(t, string(b))
	items = append(items, rawItems(t, `[{"type": "function_call_output", "call_id": "call_1", "output": "42"}]`)...)
	msgs, err := respConversation(append(rawItems(t, `"go"`), items...), index, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[1].ReasoningContent != "hmm" || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].ID != "call_1" ||
		msgs[2].Role != "tool" || msgs[2].Name != "f" || msgs[2].Content != "42" {
		t.Fatalf("got %+v", msgs)
	}
}

func TestRespConversationRefusesByName(t *testing.T) {
	for body, want := range map[string]string{
		`[{"type": "item_reference", "id": "x"}]`:                                                                              `"item_reference" items are not supported`,
		`[{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]`:                                           `input[0].content: [0].image_url: not an absolute URL`,
		`[{"role": "user", "content": [{"type": "input_image", "image_url": "ftp://h/x.png"}]}]`:                               `a ftp: URL is not fetched`,
		`[{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]`:                                        `[0].file_id: this server keeps no files`,
		`[{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "ultra"}]}]`: `[0].detail: "ultra"`,
		`[{"role": "assistant", "content": [{"type": "input_image", "image_url": "data:,"}]}]`:                                 `input_image parts are taken in user messages only`,
		`[{"role": "user", "content": [{"type": "input_audio"}]}]`:                                                             `"input_audio" parts are not supported`,
		`[{"role": "tool", "content": "x"}]`:                                                                                   `input[0].role`,
		`[{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]`:                                         `input[0].arguments`,
		`[{"role": "user", "content": "x"}, {"type": "function_call_output", "output": "x"}]`:                                  `input[1].call_id`,
		`[]`: `no messages`,
	} {
		_, err := respConversation(rawItems(t, body), index, &respImages{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", body, err, want)
		}
	}
	if _, err := respInputItems(json.RawMessage(`{"x": 1}`)); err == nil {
		t.Error("an object input was accepted")
	}
}

func TestRespToolsSkipHostedTools(t *testing.T) {
	tools, echo, err := respTools([]json.RawMessage{
		json.RawMessage(`{"type": "web_search"}`),
		json.RawMessage(`{"type": "function", "name": "f", "parameters": {"type": "object"}}`),
		json.RawMessage(`{"type": "local_shell"}`),
	})
	if err != nil || len(tools.List) != 1 || tools.List[0].Name != "f" || len(echo) != 1 {
		t.Fatalf("tools %+v, echo %d, %v", tools.List, len(echo), err)
	}
	if err := respToolChoice(&tools, json.RawMessage(`{"type": "function", "name": "f"}`), false); err != nil || tools.Req.Only != "f" || !tools.Req.Single {
		t.Fatalf("named choice: %+v, %v", tools.Req, err)
	}
	if err := respToolChoice(&tools, json.RawMessage(`{"type": "web_search_preview"}`), true); err == nil {
		t.Fatal("a hosted tool choice was accepted")
	}
	if err := respToolChoice(&tools, json.RawMessage(`"named"`), true); err == nil {
		t.Fatal(`tool_choice "named" was accepted`)
	}
}

func TestRespFormat(t *testing.T) {
	c, err := respFormat(json.RawMessage(`{"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": true}`))
	if err != nil || string(c.Schema) != `{"type": "object"}` || !c.Strict || c.Field != "text.format.schema" {
		t.Fatalf("got %+v, %v", c, err)
	}
	if _, err := respFormat(json.RawMessage(`{"type": "json_schema", "name": "x"}`)); err == nil {
		t.Fatal("a json_schema format without a schema was accepted")
	}
	if c, err := respFormat(json.RawMessage(`{"type": "text"}`)); err != nil || !c.None() {
		t.Fatalf("text: %+v, %v", c, err)
	}
}

// The stream's events for reasoning, an answer and a call: each item
// added, filled and done in order, sequence numbers counting up, and the
// whitespace between the parts opening no message.
func TestRespBuilderEventOrder(t *testing.T) {
	obj := respObject{Output: []respItemOut{}}
	var got []string
	seq := 0
	b := newRespBuilder(nil, &obj, func(ev *respEvent) error {
		if ev.SequenceNumber != seq {
			t.Fatalf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		got = append(got, ev.Type)
		return nil
	})
	b.start()
	b.take([]reply.Event{{Kind: reply.Reasoning, Text: "think"}, {Kind: reply.Reasoning, Text: "ing"}, {Kind: reply.Content, Text: "\n\n"},
		{Kind: reply.Content, Text: "Hi"}, {Kind: reply.Content, Text: "."},
		{Kind: reply.Content, Text: "\n"}, {Kind: reply.Call, Call: reply.ToolCall{Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}})
	b.finish(&task.Request{}, wire.TurnOut{Outcome: task.Outcome{Finish: "stop", Completed: 9}})
	b.end()
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(obj.Output) != 3 || obj.Output[0].Content[0].Text != "thinking" || obj.Output[1].Content[0].Text != "Hi.\n" ||
		obj.Output[2].Arguments != `{"a":1}` || !strings.HasPrefix(obj.Output[2].CallID, "call_") || obj.Status != "completed" {
		t.Fatalf("output: %+v", obj.Output)
	}
	for _, it := range obj.Output {
		if it.Status != "completed" {
			t.Errorf("item %s is %s", it.Type, it.Status)
		}
	}
}

func TestRespBuilderCutShortIsIncomplete(t *testing.T) {
	obj := respObject{Output: []respItemOut{}}
	b := newRespBuilder(nil, &obj, nil)
	b.take([]reply.Event{{Kind: reply.Content, Text: "abc"}})
	b.finish(&task.Request{Spec: task.Spec{Prompt: make([]engine.Token, 4)}}, wire.TurnOut{Outcome: task.Outcome{Finish: "length", Completed: 3}})
	if obj.Status != "incomplete" || obj.IncompleteDetails == nil || obj.IncompleteDetails.Reason != "max_output_tokens" ||
		obj.Output[0].Status != "incomplete" || obj.Usage.TotalTokens != 7 {
		t.Fatalf("got %+v", obj)
	}
}

// Whatever the input, reading it answers items or a 400, never a panic.
func FuzzRespConversation(f *testing.F) {
	f.Add(`"hi"`)
	f.Add(`[{"type": "reasoning", "summary": [{"text": "a"}]}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "x"}]}]`)
	f.Add(`[{"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, {"role": "user", "content": null}]`)
	f.Fuzz(func(t *testing.T, input string) {
		items, err := respInputItems(json.RawMessage(input))
		if err != nil {
			return
		}
		msgs, err := respConversation(items, index, nil)
		if err != nil {
			if e := wire.AsError(err); e.Status != 400 {
				t.Fatalf("%s: status %d", input, e.Status)
			}
			return
		}
		for _, m := range msgs {
			for _, c := range m.ToolCalls {
				if !json.Valid(c.Arguments) {
					t.Fatalf("%s: arguments %q", input, c.Arguments)
				}
			}
		}
	})
}

func TestRespBuilderFailEndsTheStream(t *testing.T) {
	obj := respObject{Output: []respItemOut{}}
	var last *respEvent
	b := newRespBuilder(nil, &obj, func(ev *respEvent) error { last = ev; return nil })
	b.take([]reply.Event{{Kind: reply.Content, Text: "abc"}})
	b.fail(wire.FromTask(task.ErrShutDown))
	if last.Type != "response.failed" || obj.Status != "failed" || obj.Error == nil || obj.Error.Message == "" || obj.Output[0].Status != "incomplete" {
		t.Fatalf("last event %s, response %+v", last.Type, obj)
	}
}

// input_image parts stand in their message as the media marker, a data
// URL's image decoded, an http(s) URL's left to fetch at its slot, a
// file's read.
func TestRespConversationImages(t *testing.T) {
	body := `[{"role": "user", "content": [{"type": "input_text", "text": "a"},
		{"type": "input_image", "image_url": "data:image/png;base64,aGVsbG8=", "detail": "low"},
		{"type": "input_text", "text": "b"},
		{"type": "input_image", "image_url": "https://example.com/x.png"},
		{"type": "input_image", "file_id": "file-7"}]}]`
	img := respImages{file: func(id string) ([]byte, error) { return []byte("file " + id), nil }}
	msgs, err := respConversation(rawItems(t, body), index, &img)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a" + task.MediaMarker + "b" + task.MediaMarker + task.MediaMarker; len(msgs) != 1 || msgs[0].Content != want {
		t.Fatalf("messages %+v, want one user message %q", msgs, want)
	}
	if len(img.images) != 3 || string(img.images[0]) != "hello" || img.images[1] != nil || string(img.images[2]) != "file file-7" {
		t.Fatalf("images %q", img.images)
	}
	if len(img.remote) != 1 || img.remote[0].Index != 1 || img.remote[0].URL != "https://example.com/x.png" ||
		img.remote[0].Field != "input" || img.remote[0].At != "input[0].content[3].image_url" {
		t.Errorf("remote %+v", img.remote)
	}
}

// A file_id is checked as an id before any look-up.
func TestRespImageFileID(t *testing.T) {
	img := respImages{file: func(id string) ([]byte, error) { t.Fatalf("looked up %.20q", id); return nil, nil }}
	long := `[{"role": "user", "content": [{"type": "input_image", "file_id": "file-` + strings.Repeat("x", 5000) + `"}]}]`
	_, err := respConversation(rawItems(t, long), index, &img)
	if err == nil || !strings.Contains(err.Error(), "[0].file_id: Invalid 'file_id'") || len(err.Error()) > 400 {
		t.Errorf("a 5,000-character file_id: %.300v", err)
	}
	both := `[{"role": "user", "content": [{"type": "input_image", "file_id": "file-1", "image_url": "https://h/x.png"}]}]`
	if _, err := respConversation(rawItems(t, both), index, &img); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("file_id and image_url: %v", err)
	}
}
