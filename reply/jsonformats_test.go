package reply

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/chat"
	"superfluid/grammar"
)

// The JSON-argument formats, each on text as its models emit it (from the
// template's rendering and the model's documentation), parsed by the
// syntax Detect found in the real template.

// jsonTemplateFormat detects the format of a shared template.
func jsonTemplateFormat(t *testing.T, file string) Format {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("../../shared/templates", file+".jinja"))
	if err != nil {
		t.Skipf("../shared/templates is absent: %v", err)
	}
	tmpl, err := chat.Parse(string(src), chat.Options{BOS: "<s>", EOS: "</s>"})
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return Detect(tmpl, string(src))
}

// jsonReply is what a reply parses into.
type jsonReply struct {
	content, reasoning string
	calls              []ToolCall
	warned             bool
}

func jsonCollect(f Format, opts Options, pieces []string) (got jsonReply) {
	opts.Warn = func(string) { got.warned = true }
	p := f.NewParser(opts)
	take := func(evs []Event) {
		for _, e := range evs {
			switch e.Kind {
			case Content:
				got.content += e.Text
			case Reasoning:
				got.reasoning += e.Text
			case Call:
				got.calls = append(got.calls, e.Call)
			}
		}
	}
	for _, piece := range pieces {
		take(p.Feed(piece))
	}
	take(p.Finish())
	return got
}

// jsonCheckSplits parses text whole, split in two at every byte, and one
// byte at a time, and wants want each time, with no marker in content
// unless want has it there.
func jsonCheckSplits(t *testing.T, f Format, opts Options, text string, want jsonReply) {
	t.Helper()
	check := func(how string, pieces []string) {
		t.Helper()
		got := jsonCollect(f, opts, pieces)
		if got.content != want.content || got.reasoning != want.reasoning || got.warned != want.warned {
			t.Fatalf("%s: content %q reasoning %q warned %v; want %q, %q, %v",
				how, got.content, got.reasoning, got.warned, want.content, want.reasoning, want.warned)
		}
		if len(got.calls) != len(want.calls) {
			t.Fatalf("%s: %d calls %+v; want %d", how, len(got.calls), got.calls, len(want.calls))
		}
		for i, c := range got.calls {
			w := want.calls[i]
			if c.Name != w.Name || c.ID != w.ID || !sameJSON(c.Arguments, w.Arguments) {
				t.Fatalf("%s: call %d is %q %q %s; want %q %q %s", how, i, c.ID, c.Name, c.Arguments, w.ID, w.Name, w.Arguments)
			}
		}
		for _, m := range f.Markers() {
			if strings.TrimSpace(m) != "" && strings.Contains(got.content, m) && !strings.Contains(want.content, m) {
				t.Fatalf("%s: marker %q leaked into content %q", how, m, got.content)
			}
		}
	}
	check("whole", []string{text})
	for i := 1; i < len(text); i++ {
		check("split", []string{text[:i], text[i:]})
	}
	var bytewise []string
	for i := 0; i < len(text); i++ {
		bytewise = append(bytewise, text[i:i+1])
	}
	check("bytewise", bytewise)
}

func jcall(name, args string) ToolCall {
	return ToolCall{Name: name, Arguments: json.RawMessage(args)}
}

func jcallID(id, name, args string) ToolCall {
	return ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

var jsonTools = []Tool{
	{Name: "get_weather", Description: "Weather in a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)},
	{Name: "note", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
	{Name: "brave_search", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
}

func jsonOptions() Options { return Options{Tools: []string{"get_weather", "note", "brave_search"}} }

func TestJSONFormats(t *testing.T) {
	for _, c := range jsonCases {
		t.Run(c.name, func(t *testing.T) {
			f := jsonTemplateFormat(t, c.template)
			if f.Name != c.format {
				t.Fatalf("%s: format %q, want %q", c.template, f.Name, c.format)
			}
			opts := jsonOptions()
			if c.opts != nil {
				opts = c.opts(f)
			}
			jsonCheckSplits(t, f, opts, c.text, c.want)
			if c.grammar != "" {
				jsonCheckGrammar(t, f, c.grammar)
			}
			if c.grammar2 != "" {
				jsonCheckParallel(t, f, c.grammar2)
			}
		})
	}
}

// jsonCheckGrammar wants the required single-call grammar of f to accept
// text, and to refuse it with the tool's name changed.
func jsonCheckGrammar(t *testing.T, f Format, text string) {
	t.Helper()
	c, err := f.Grammar(jsonTools, Requirement{Required: true, Single: true})
	if err != nil {
		t.Fatalf("grammar: %v", err)
	}
	g, err := grammar.ParseGBNF(c.GBNF)
	if err != nil {
		t.Fatalf("grammar does not parse: %v\n%s", err, c.GBNF)
	}
	if !g.Accepts(text) {
		t.Fatalf("grammar refuses %q\n%s", text, c.GBNF)
	}
	if bad := strings.Replace(text, "get_weather", "get_whether", 1); g.Accepts(bad) {
		t.Fatalf("grammar accepts an undeclared tool: %q", bad)
	}
	if bad := strings.Replace(text, `"Paris"`, `7`, 1); bad != text && g.Accepts(bad) {
		t.Fatalf("grammar accepts an argument against its schema: %q", bad)
	}
	// What the grammar accepts, the parser reads back.
	got := jsonCollect(f, Options{Tools: jsonOptions().Tools}, []string{text})
	if len(got.calls) != 1 || got.calls[0].Name != "get_weather" || strings.TrimSpace(got.content) != "" {
		t.Fatalf("the grammar's text parses into %+v", got)
	}
}

// jsonCheckParallel wants the parallel grammar of f to accept text of two
// calls, the single-call grammar to refuse it, and the parser to read the
// two calls back.
func jsonCheckParallel(t *testing.T, f Format, text string) {
	t.Helper()
	for _, single := range []bool{false, true} {
		c, err := f.Grammar(jsonTools, Requirement{Required: true, Single: single})
		if err != nil {
			t.Fatalf("grammar: %v", err)
		}
		g, err := grammar.ParseGBNF(c.GBNF)
		if err != nil {
			t.Fatalf("grammar does not parse: %v", err)
		}
		if g.Accepts(text) == single {
			t.Fatalf("single %v: the grammar accepts %q: %v\n%s", single, text, !single, c.GBNF)
		}
	}
	got := jsonCollect(f, Options{Tools: jsonOptions().Tools}, []string{text})
	if len(got.calls) != 2 || strings.TrimSpace(got.content) != "" {
		t.Fatalf("the grammar's text parses into %+v", got)
	}
}

// A template that renders no calls gets the generic format: the tools
// and Hermes' syntax are described in the system turn, and the reply is
// read and constrained in that syntax.
func TestGenericFormat(t *testing.T) {
	f := jsonTemplateFormat(t, "google-gemma-2-2b-it")
	if !f.Generic || f.Name != "generic" {
		t.Fatalf("format %q, Generic %v", f.Name, f.Generic)
	}
	prompt := f.SystemPrompt(jsonTools)
	for _, want := range []string{"get_weather", "Weather in a city.", `"required":["city"]`, "note", "<tool_call>", "</tool_call>", `"arguments"`} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, prompt)
		}
	}
	text := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	jsonCheckSplits(t, f, jsonOptions(), "Sure. "+text, jsonReply{content: "Sure.", calls: []ToolCall{jcall("get_weather", paris)}})
	jsonCheckGrammar(t, f, text)
}

// Markers lists every marker of the format, so the engine renders each
// as text even where it is a special token.
func TestJSONFormatMarkers(t *testing.T) {
	for _, c := range []struct {
		template string
		want     []string
	}{
		{"Qwen-Qwen3-0.6B", []string{"<think>", "</think>", "<tool_call>", "</tool_call>"}},
		{"meta-llama-Llama-3.1-8B-Instruct", []string{"<|python_tag|>", "<|eom_id|>"}},
		{"upstage-Solar-Open-100B", []string{"<|tool_calls|>", "<|tool_call:begin|>", "<|tool_call:name|>", "<|tool_call:args|>", "<|tool_call:end|>", "<|calls|>"}},
		{"Mistral-Small-3.2-24B-Instruct-2506", []string{"[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"}},
		{"CohereForAI-c4ai-command-r7b-12-2024-tool_use", []string{"<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>", "<|END_ACTION|>"}},
		{"meetkai-functionary-medium-v3.2", []string{">>>", ">>>all\n"}},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", []string{"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"}},
	} {
		f := jsonTemplateFormat(t, c.template)
		have := map[string]bool{}
		for _, m := range f.Markers() {
			have[m] = true
		}
		for _, m := range c.want {
			if !have[m] {
				t.Errorf("%s: Markers %q lack %q", c.template, f.Markers(), m)
			}
		}
	}
}

// Python literals as Functionary v3.2 and LFM2 write them.
func TestPyLiteral(t *testing.T) {
	for in, want := range map[string]string{
		`{'a': 'x', "b": [1, 2.5, True, None], 'c': {'d': 'it\'s'}}`: `{"a":"x","b":[1,2.5,true,null],"c":{"d":"it's"}}`,
		`{'u': '\u00e9\n'}`: `{"u":"é\n"}`,
		`{}`:                `{}`,
	} {
		got, err := pyLiteral(in)
		if err != nil || !sameJSON(got, json.RawMessage(want)) {
			t.Errorf("pyLiteral(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`{'a': }`, `{'a' 'b'}`, `{'a': 'x'`, `[1, 2`, `{'a': os.system}`, strings.Repeat("[", 100000)} {
		if got, err := pyLiteral(bad); err == nil {
			t.Errorf("pyLiteral(%.40s) = %s; want an error", bad, got)
		}
	}
	args, err := pyKwargs(`city='Paris', days=3, ok=True`)
	if err != nil || !sameJSON(args, json.RawMessage(`{"city":"Paris","days":3,"ok":true}`)) {
		t.Errorf("pyKwargs = %s, %v", args, err)
	}
}

// A reply cut anywhere (generation stopped by max_tokens) parses without
// a panic, and loses no text: what is not a call comes back as content.
func TestJSONFormatsCutShort(t *testing.T) {
	for _, c := range jsonCases {
		f := jsonTemplateFormat(t, c.template)
		opts := jsonOptions()
		if c.opts != nil {
			opts = c.opts(f)
		}
		for n := 0; n <= len(c.text); n++ {
			got := jsonCollect(f, opts, []string{c.text[:n]})
			// Whitespace before what looked like a call is not kept.
			squeeze := func(s string) string { return strings.Join(strings.Fields(s), "") }
			if len(got.calls) == 0 && got.warned && !strings.Contains(squeeze(opts.Lead+c.text[:n]), squeeze(got.content)) {
				t.Errorf("%s cut at %d: content %q is not the text's", c.name, n, got.content)
			}
		}
	}
}

// Under tool_choice "auto" the grammar is lazy and starts at the call
// openers; a template that writes one call a turn is never asked for two.
func TestJSONLazyAndOneCall(t *testing.T) {
	f := jsonTemplateFormat(t, "meta-llama-Llama-3.1-8B-Instruct")
	c, err := f.Grammar(jsonTools, Requirement{})
	if err != nil {
		t.Fatal(err)
	}
	// The bare {"name" opener counts only at the reply's start, so it
	// triggers nothing; <|python_tag|> does.
	if !c.Lazy || strings.Join(c.Triggers, " ") != `<|python_tag|>` {
		t.Fatalf("lazy %v, triggers %q", c.Lazy, c.Triggers)
	}
	g, err := grammar.ParseGBNF(c.GBNF)
	if err != nil {
		t.Fatal(err)
	}
	one := `{"name": "get_weather", "parameters": {"city": "Paris"}}`
	if !g.Accepts(one) || g.Accepts(one+"\n"+one) {
		t.Fatalf("Llama 3.1's grammar must take one call and only one:\n%s", c.GBNF)
	}
	f = jsonTemplateFormat(t, "Qwen-Qwen2.5-7B-Instruct")
	if c, err = f.Grammar(jsonTools, Requirement{Required: true, Only: "note"}); err != nil {
		t.Fatal(err)
	}
	if g, err = grammar.ParseGBNF(c.GBNF); err != nil {
		t.Fatal(err)
	}
	if c.Lazy || g.Accepts("<tool_call>\n"+`{"name": "get_weather", "arguments": {"city": "Paris"}}`+"\n</tool_call>") ||
		!g.Accepts("<tool_call>\n"+`{"name": "note", "arguments": {"text": "x"}}`+"\n</tool_call>") {
		t.Fatalf("a named tool_choice must hold the call to that tool:\n%s", c.GBNF)
	}
}

// Functionary v3.2's generation prompt ends with ">>>": a required call
// is held to the grammar from after it, and the parser, told of the lead,
// reads what the grammar allows.
func TestJSONLeadGrammar(t *testing.T) {
	f := jsonTemplateFormat(t, "meetkai-functionary-medium-v3.2")
	lead := f.PromptLead("<|start_header_id|>assistant<|end_header_id|>\n\n>>>")
	if lead != ">>>" {
		t.Fatalf("lead %q", lead)
	}
	c, err := f.Grammar(jsonTools, Requirement{Required: true, Lead: lead})
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.ParseGBNF(c.GBNF)
	if err != nil {
		t.Fatal(err)
	}
	text := "get_weather\n{\"city\": \"Paris\"}>>>note\n{\"text\": \"x\"}"
	if !g.Accepts(text) || g.Accepts(">>>"+text) {
		t.Fatalf("the grammar after the lead:\n%s", c.GBNF)
	}
	got := jsonCollect(f, Options{Lead: lead, Tools: jsonOptions().Tools}, []string{text})
	if len(got.calls) != 2 || got.content != "" || got.warned {
		t.Fatalf("parsed %+v", got)
	}
}
