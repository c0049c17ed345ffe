package chat

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzTemplates are the templates FuzzRender feeds arbitrary contents to.
var fuzzTemplates = []string{"llama-3.jinja", "deepseek-coder.jinja", "mistral-v0.1.jinja", "gemma.jinja", "llama-2.jinja", "zephyr.jinja", "qwen2.5-instruct.jinja"}

// FuzzRender renders arbitrary message contents with every known template.
// No input may panic the engine; with ChatML, whose output is fully
// determined by the messages, the output must be exactly the messages
// framed, each content verbatim.
func FuzzRender(f *testing.F) {
	f.Add("You are terse.", "Hi", "Hello!", true)
	f.Add("", "", "", false)
	f.Add("{{ x }}", "{% if %}", "<|im_end|>\n", true)
	f.Add("  \t\n", "é🦙\x00", "\r\n'\"\\", false)
	f.Add("\xff\xfe", "a\nb", "}}{{", true)

	opts := Options{BOS: "<s>", EOS: "</s>"}
	chatml := mustParse(f, ChatML, opts)
	tmpls := make([]*Template, len(fuzzTemplates))
	for i, name := range fuzzTemplates {
		tmpls[i] = mustParse(f, testdataTemplate(f, name), opts)
	}
	f.Fuzz(func(t *testing.T, sys, user, asst string, agp bool) {
		msgs := []Message{
			{Role: RoleSystem, Content: sys},
			{Role: RoleUser, Content: user},
			{Role: RoleAssistant, Content: asst},
			{Role: RoleUser, Content: sys + user},
		}
		got, err := chatml.Render(msgs, agp)
		if err != nil {
			t.Fatalf("ChatML: %v", err)
		}
		var want strings.Builder
		for _, m := range msgs {
			want.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		}
		if agp {
			want.WriteString("<|im_start|>assistant\n")
		}
		if got != want.String() {
			t.Fatalf("ChatML:\n got %q\nwant %q", got, want.String())
		}
		for i, tmpl := range tmpls {
			out, err := tmpl.Render(msgs, agp)
			if errors.Is(err, errEnginePanic) {
				t.Fatalf("%s: %v", fuzzTemplates[i], err)
			}
			if err == nil && utf8.ValidString(sys) && utf8.ValidString(user) && utf8.ValidString(asst) && !utf8.ValidString(out) {
				t.Fatalf("%s: valid input gave invalid UTF-8 %q", fuzzTemplates[i], out)
			}
		}
	})
}

// FuzzParse feeds arbitrary template text to Parse and, when it parses,
// renders with it: malformed templates must fail with an error, never a
// panic in the engine.
func FuzzParse(f *testing.F) {
	f.Add(ChatML, "hi")
	for _, name := range fuzzTemplates {
		f.Add(testdataTemplate(f, name), "hi")
	}
	f.Add("{% for m in messages %}{{ m.content[1:] | trim | upper }}{% endfor %}", "x")
	f.Add("{{ messages[0].content.split(' ')[-1] }}{% set ns = namespace(a=1) %}{{ ns.a }}", "a b")
	f.Add("{% if %}", "")
	f.Add("{{ ", "")
	f.Fuzz(func(t *testing.T, src, content string) {
		tmpl, err := Parse(src, Options{BOS: "<s>", EOS: "</s>"})
		if errors.Is(err, errEnginePanic) {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if err != nil {
			return
		}
		_, err = tmpl.Render([]Message{{Role: RoleSystem, Content: content}, {Role: RoleUser, Content: content}}, true)
		if errors.Is(err, errEnginePanic) {
			t.Fatalf("Render(%q): %v", src, err)
		}
	})
}

// FuzzRewriteSource feeds arbitrary template text through the tag
// rewrites and the engine: nothing may panic, and text without a tag
// opener comes through unchanged.
func FuzzRewriteSource(f *testing.F) {
	f.Add("{% for x in xs if x -%}{{ x|tojson(indent=2) }}{% endfor %}")
	f.Add("{{ 'a|tojson' }}{# .append( #}{% raw %}{{ x.append(1) }}{% endraw %}")
	f.Add("{% for a, b in d.items() recursive %}{{ l.pop() }}{% endfor")
	f.Add("{{ \"unterminated")
	f.Fuzz(func(t *testing.T, src string) {
		if !strings.Contains(src, "{") {
			want := strings.TrimSuffix(newlines.Replace(src+"\n"), "\n") // line endings alone change
			if got, err := prepareSource(src+"\n", &DefaultLimits); err == nil && got != want {
				t.Fatalf("text without tags changed: %q -> %q", src, got)
			}
		}
		if _, err := Parse(src, Options{}); errors.Is(err, errEnginePanic) {
			t.Fatalf("engine panicked on %q: %v", src, err)
		}
	})
}

// sandboxFuzzLimits are small bounds, so that the fuzzer reaches them
// quickly and the worst a template can do stays cheap.
var sandboxFuzzLimits = Limits{Steps: 20000, OutputBytes: 1 << 16, ValueBytes: 1 << 16, ValueDepth: 500, RangeItems: 10000, StackFrames: 1500, Time: 2 * time.Second}

// FuzzSandbox renders arbitrary template text with arbitrary messages
// under small limits: a template must render or fail with an error,
// never crash the process (a stack overflow or an exhausted heap would end
// the fuzzer), and what it renders stays within the output bound (plus the
// template's own top-level text, which a render writes at most once).
func FuzzSandbox(f *testing.F) {
	for _, src := range []string{
		ChatML,
		"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"{% for i in range(10000000000) %}{{ i }}{% endfor %}",
		"{{ 'a' * 1000000000000 }}",
		"{% set ns = namespace(s='a') %}{% for m in messages %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% endfor %}{{ ns.s }}",
		"{% set ns = namespace(x=1) %}{% set ns.y = [ns] %}{{ ns }}",
		"{% macro m() %}{{ caller() }}{% endmacro %}{% macro f(s) %}{% call m() %}{{ f(s ~ s) }}{% endcall %}{% endmacro %}{{ f('x') }}",
		"{% for m in messages %}{{ m.content * 100000 }}{{ m.content|replace('', m.content) }}{% endfor %}",
		"{{ messages[10000000000::-3] }}{{ (messages[0].content * 10)[::7] }}{{ range(5)|join(messages[0].content * 1000) }}",
		"{% for m in messages %}{% for n in messages %}{% for o in messages %}{{ m.content ~ n.content ~ o.content }}{% endfor %}{% endfor %}{% endfor %}",
	} {
		f.Add(src, "hello", uint8(3))
	}
	f.Fuzz(func(t *testing.T, src, content string, n uint8) {
		tmpl, err := Parse(src, Options{BOS: "<s>", EOS: "</s>", Limits: sandboxFuzzLimits})
		if err != nil {
			return
		}
		msgs := make([]Message, int(n)%32+1)
		for i := range msgs {
			msgs[i] = Message{Role: []string{RoleUser, RoleAssistant}[i%2], Content: content}
		}
		out, err := tmpl.Exact(Request{Messages: msgs, AddGenerationPrompt: true})
		if err == nil && int64(len(out)) > sandboxFuzzLimits.OutputBytes+int64(len(src)) {
			t.Fatalf("rendered %d bytes, beyond the %d-byte output bound and the template's %d bytes", len(out), sandboxFuzzLimits.OutputBytes, len(src))
		}
	})
}
