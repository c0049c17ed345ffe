package reply

import (
	"strings"
	"testing"
)

const qwenCoderCalls = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n" +
	"<tool_call>\n<function=note>\n<parameter=text>\n7\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n</function>\n</tool_call>"

var weatherCalls = []ToolCall{call("get_weather", `{"city":"Paris","days":3}`), call("note", `{"text":"7","tags":["a","b"]}`)}

func TestQwen3CoderStream(t *testing.T) {
	f := templateFormat(t, "Qwen3-Coder.jinja")
	if f.Name != "qwen3-coder" {
		t.Fatalf("format %q", f.Name)
	}
	checkSplits(t, f, weatherOptions(), "Let me look.\n"+qwenCoderCalls, replyWant{content: "Let me look.", calls: weatherCalls})
}

func TestQwen35CallAfterReasoning(t *testing.T) {
	f := templateFormat(t, "Qwen3.5-4B.jinja")
	opts := weatherOptions()
	opts.InReasoning = true
	text := "\nThe user wants weather.\n</think>\n\n" + qwenCoderCalls
	checkSplits(t, f, opts, text, replyWant{reasoning: "The user wants weather.", calls: weatherCalls})
}

func TestQwen3CoderMalformed(t *testing.T) {
	f := templateFormat(t, "Qwen3-Coder.jinja")
	bad := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>"
	checkSplits(t, f, weatherOptions(), bad, replyWant{content: bad, warned: true})
	unknown := "<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>"
	checkSplits(t, f, weatherOptions(), unknown, replyWant{content: unknown, warned: true})
}

func TestQwen3CoderUntypedValues(t *testing.T) {
	// Without schemas a value that reads as JSON is JSON.
	f := templateFormat(t, "Qwen3-Coder.jinja")
	checkSplits(t, f, Options{}, qwenCoderCalls, replyWant{calls: []ToolCall{
		call("get_weather", `{"city":"Paris","days":3}`), call("note", `{"text":7,"tags":["a","b"]}`)}})
}

func TestGLMStream(t *testing.T) {
	text := "<think>Need weather.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n" +
		"<tool_call>note\n<arg_key>text</arg_key>\n<arg_value>7</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>[\"a\", \"b\"]</arg_value>\n</tool_call>"
	for _, file := range []string{"GLM-4.6.jinja", "GLM-4.7-Flash.jinja", "inclusionai-ling-3.0-flash.jinja", "poolside-Laguna-XS.2.jinja", "Spark2.5.jinja"} {
		t.Run(file, func(t *testing.T) {
			f := templateFormat(t, file)
			if f.Name != "glm" {
				t.Fatalf("format %q", f.Name)
			}
			checkSplits(t, f, weatherOptions(), text, replyWant{reasoning: "Need weather.", calls: weatherCalls})
		})
	}
}

func TestMiniMaxM2Stream(t *testing.T) {
	f := templateFormat(t, "MiniMax-M2.jinja")
	text := "<think>\nweather\n</think>\n\nChecking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n" +
		"<invoke name=\"note\">\n<parameter name=\"text\">7</parameter>\n<parameter name=\"tags\">[\"a\",\"b\"]</parameter>\n</invoke>\n</minimax:tool_call>"
	checkSplits(t, f, weatherOptions(), text, replyWant{reasoning: "weather", content: "Checking.", calls: weatherCalls})
}

func TestDeepSeekDSMLStream(t *testing.T) {
	text := "Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n" +
		"<｜DSML｜invoke name=\"note\">\n<｜DSML｜parameter name=\"text\" string=\"true\">7</｜DSML｜parameter>\n<｜DSML｜parameter name=\"tags\" string=\"false\">[\"a\",\"b\"]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
	f := templateFormat(t, "deepseek-ai-DeepSeek-V3.2.jinja")
	// string="true" decides even without schemas.
	checkSplits(t, f, Options{}, text, replyWant{content: "Checking.", calls: weatherCalls})
}

func TestSeedOSSStream(t *testing.T) {
	f := templateFormat(t, "ByteDance-Seed-OSS.jinja")
	text := "<seed:think>weather</seed:think>\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=days>3</parameter>\n</function>\n</seed:tool_call>"
	checkSplits(t, f, weatherOptions(), text, replyWant{reasoning: "weather", calls: weatherCalls[:1]})
}

func TestMiniMaxM3Stream(t *testing.T) {
	f := templateFormat(t, "MiniMax-M3.jinja")
	if f.Name != "minimax-m3" {
		t.Fatalf("format %q", f.Name)
	}
	const tk = "]<]minimax[>["
	text := "<mm:think>weather</mm:think>Checking.\n" + tk + "<tool_call>\n" + tk + "<invoke name=\"get_weather\">" + tk + "<city>Paris" + tk + "</city>" + tk + "<days>3" + tk + "</days>" + tk + "</invoke>\n" +
		tk + "<invoke name=\"note\">" + tk + "<text>7" + tk + "</text>" + tk + "<tags>[\"a\",\"b\"]" + tk + "</tags>" + tk + "</invoke>\n" + tk + "</tool_call>"
	checkSplits(t, f, weatherOptions(), text, replyWant{reasoning: "weather", content: "Checking.", calls: weatherCalls})
	checkGrammarAccepts(t, f, text[strings.Index(text, tk):], false)
}

func TestQwen3CoderHermesFallback(t *testing.T) {
	// Qwen3.5 sometimes writes the Hermes JSON call of its elders.
	f := templateFormat(t, "Qwen3.5-4B.jinja")
	text := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"
	checkSplits(t, f, weatherOptions(), text, replyWant{calls: weatherCalls[:1]})
}

func TestMarkupParsersSurviveTruncation(t *testing.T) {
	// Every prefix of a reply, ended there, parses without a panic, and a
	// call it returns is a whole one.
	texts := map[string]string{"Qwen3-Coder.jinja": qwenCoderCalls, "moonshotai-Kimi-K2.jinja": kimiText,
		"openai-gpt-oss-120b.jinja":   "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
		"google-gemma-4-31B-it.jinja": "<|tool_call>call:note{tags:[<|\"|>a<|\"|>],text:<|\"|>x<|\"|>}<tool_call|>",
		"MiniMax-M2.jinja":            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>"}
	for file, text := range texts {
		f := templateFormat(t, file)
		for i := 0; i <= len(text); i++ {
			got := collect(f, weatherOptions(), []string{text[:i]})
			for _, c := range got.calls {
				if !sameJSON(c.Arguments, c.Arguments) {
					t.Fatalf("%s: prefix %d gives arguments %s", file, i, c.Arguments)
				}
			}
		}
	}
}
