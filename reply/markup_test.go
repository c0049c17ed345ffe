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

// templateFormat detects the format of a shared template, skipping the
// test when ../shared is absent.
func templateFormat(t *testing.T, file string) Format {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("../../shared/templates", file))
	if err != nil {
		t.Skipf("template %s is absent: %v", file, err)
	}
	tmpl, err := chat.Parse(string(src), chat.Options{BOS: "<s>", EOS: "</s>"})
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return Detect(tmpl, string(src))
}

// replyWant is what a reply must parse into, however it is split.
type replyWant struct {
	content, reasoning string
	calls              []ToolCall
	warned             bool
}

// collect feeds pieces and gathers the events.
func collect(f Format, opts Options, pieces []string) (got replyWant) {
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

// checkSplits parses text whole, split at every byte, and byte by byte,
// and wants the same result each time.
func checkSplits(t *testing.T, f Format, opts Options, text string, want replyWant) {
	t.Helper()
	check := func(how string, pieces []string) {
		t.Helper()
		got := collect(f, opts, pieces)
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
				t.Fatalf("%s: call %d is %s %s %s; want %s %s %s", how, i, c.ID, c.Name, c.Arguments, w.ID, w.Name, w.Arguments)
			}
		}
		for _, m := range f.Markers() {
			if m != "" && strings.Contains(got.content, m) && !want.warned && !strings.Contains(want.content, m) {
				t.Fatalf("%s: marker %q leaked into content %q", how, m, got.content)
			}
		}
	}
	check("whole", []string{text})
	for i := 1; i < len(text); i++ {
		check("split", []string{text[:i], text[i:]})
	}
	var bytes []string
	for i := 0; i < len(text); i++ {
		bytes = append(bytes, text[i:i+1])
	}
	check("bytewise", bytes)
}

func call(name, args string) ToolCall {
	return ToolCall{Name: name, Arguments: json.RawMessage(args)}
}

var weatherTools = []Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)},
	{Name: "note", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["text"]}`)},
}

func weatherOptions() Options {
	o := Options{Tools: []string{"get_weather", "note"}, Schemas: map[string]json.RawMessage{}}
	for _, t := range weatherTools {
		o.Schemas[t.Name] = t.Parameters
	}
	return o
}

// checkGrammarAccepts wants the call grammar of f, required, to accept
// text, and to refuse the same text with the first call's name changed.
func checkGrammarAccepts(t *testing.T, f Format, text string, single bool) {
	t.Helper()
	c, err := f.Grammar(weatherTools, Requirement{Required: true, Single: single})
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
	if bad := strings.Replace(text, "get_weather", "get_whether", 1); bad != text && g.Accepts(bad) {
		t.Fatalf("grammar accepts an undeclared tool: %q", bad)
	}
}

func parseGrammar(text string) (*grammar.Grammar, error) { return grammar.ParseGBNF(text) }
