package reply

import "testing"

func TestHarmonyStream(t *testing.T) {
	f := templateFormat(t, "openai-gpt-oss-120b.jinja")
	if f.Name != "harmony" {
		t.Fatalf("format %q", f.Name)
	}
	paris := []ToolCall{call("get_weather", `{"city":"Paris"}`)}
	cases := []struct {
		name, text string
		want       replyWant
	}{
		{"final", "<|channel|>analysis<|message|>Think hard.<|end|><|start|>assistant<|channel|>final<|message|>The answer.<|return|>",
			replyWant{reasoning: "Think hard.", content: "The answer."}},
		{"final only", "<|channel|>final<|message|>Hi there.", replyWant{content: "Hi there."}},
		{"call after reasoning", "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
			replyWant{reasoning: "Need weather.", calls: paris}},
		{"recipient first", " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>",
			replyWant{calls: paris}},
		{"no call token", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
			replyWant{calls: paris}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkSplits(t, f, weatherOptions(), c.text, c.want) })
	}
	bad := "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": Paris}<|call|>"
	got := collect(f, weatherOptions(), []string{bad})
	if len(got.calls) != 0 || !got.warned || got.content == "" {
		t.Fatalf("a malformed call reads as %+v", got)
	}
	checkGrammarAccepts(t, f, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": 2}<|call|>", true)
	checkGrammarAccepts(t, f, "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}", true)
	checkGrammarAccepts(t, f, " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>", true)
}

func TestHarmonyPreambleThenCall(t *testing.T) {
	f := templateFormat(t, "openai-gpt-oss-120b.jinja")
	text := "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking the weather.<|end|>" +
		"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"
	checkSplits(t, f, weatherOptions(), text, replyWant{reasoning: "Look it up.", content: "Checking the weather.", calls: []ToolCall{call("get_weather", `{"city":"Paris"}`)}})
}
