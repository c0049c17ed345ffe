package reply

import "testing"

func TestGemma4Stream(t *testing.T) {
	f := templateFormat(t, "google-gemma-4-31B-it.jinja")
	if f.Name != "gemma4" {
		t.Fatalf("format %q", f.Name)
	}
	text := "<|channel>thought\nweather in Paris\n<channel|>Checking.<|tool_call>call:get_weather{city:<|\"|>Paris, \"FR\"<|\"|>,days:3}<tool_call|>" +
		"<|tool_call>call:note{tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>],text:<|\"|>x}y<tool_call|> z<|\"|>}<tool_call|>"
	want := []ToolCall{call("get_weather", `{"city":"Paris, \"FR\"","days":3}`), call("note", `{"tags":["a","b"],"text":"x}y<tool_call|> z"}`)}
	checkSplits(t, f, weatherOptions(), text, replyWant{reasoning: "weather in Paris", content: "Checking.", calls: want})
	bad := "<|tool_call>call:get_weather{city:Paris}<tool_call|>"
	checkSplits(t, f, weatherOptions(), bad, replyWant{content: bad, warned: true})
	checkGrammarAccepts(t, f, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|><|tool_call>call:note{text:<|\"|>hi<|\"|>,tags:[<|\"|>a<|\"|>]}<tool_call|>", false)
	checkGrammarAccepts(t, f, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|>", true)
}
