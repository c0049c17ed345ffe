package reply

import "testing"

const kimiText = "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3}<|tool_call_end|>" +
	"<|tool_call_begin|>functions.note:1<|tool_call_argument_begin|>{\"text\": \"7\"}<|tool_call_end|><|tool_calls_section_end|>"

func TestKimiK2Stream(t *testing.T) {
	f := templateFormat(t, "moonshotai-Kimi-K2.jinja")
	if f.Name != "kimi-k2" {
		t.Fatalf("format %q", f.Name)
	}
	want := []ToolCall{call("get_weather", `{"city":"Paris","days":3}`), call("note", `{"text":"7"}`)}
	want[0].ID, want[1].ID = "functions.get_weather:0", "functions.note:1"
	checkSplits(t, f, weatherOptions(), kimiText, replyWant{content: "I'll check.", calls: want})
	bad := "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": <|tool_call_end|><|tool_calls_section_end|>"
	checkSplits(t, f, weatherOptions(), bad, replyWant{content: bad, warned: true})
	checkGrammarAccepts(t, f, kimiText[len("I'll check."):], false)
}

func TestKimiK2FromSource(t *testing.T) {
	// The ids of these templates are built with list.append, which the
	// reference sandbox refuses: the syntax comes from the source.
	for _, file := range []string{"Kimi-K2-Instruct.jinja", "Kimi-K2-Thinking.jinja"} {
		f := templateFormat(t, file)
		if f.Name != "kimi-k2" {
			t.Fatalf("%s: format %q", file, f.Name)
		}
		got := collect(f, weatherOptions(), []string{kimiText})
		if len(got.calls) != 2 || got.calls[1].ID != "functions.note:1" {
			t.Fatalf("%s: %+v", file, got)
		}
	}
	f := templateFormat(t, "Kimi-K2-Thinking.jinja")
	opts := weatherOptions()
	opts.InReasoning = true
	want := []ToolCall{call("get_weather", `{"city":"Paris","days":3}`), call("note", `{"text":"7"}`)}
	want[0].ID, want[1].ID = "functions.get_weather:0", "functions.note:1"
	checkSplits(t, f, opts, "weather first</think>"+kimiText, replyWant{reasoning: "weather first", content: "I'll check.", calls: want})
}

func TestKimiK3Stream(t *testing.T) {
	f := templateFormat(t, "Kimi-K3.jinja")
	if f.Name != "kimi-k3" {
		t.Fatalf("format %q", f.Name)
	}
	calls := "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>" +
		"<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|><|close|>call<|sep|>" +
		"<|open|>call tool=\"note\" index=\"2\"<|sep|><|open|>argument key=\"text\" type=\"string\"<|sep|>7<|close|>argument<|sep|>" +
		"<|open|>argument key=\"tags\" type=\"array\"<|sep|>[\"a\",\"b\"]<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
	opts := Options{InReasoning: true} // type="string" decides without schemas
	checkSplits(t, f, opts, "weather<|close|>think<|sep|>Checking."+calls, replyWant{reasoning: "weather", content: "Checking.", calls: weatherCalls})
	checkGrammarAccepts(t, f, calls, false)
}
