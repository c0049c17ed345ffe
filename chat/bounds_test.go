package chat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

// wantBound checks that err is a *BoundError for bound.
func wantBound(t *testing.T, what string, err error, bound string) {
	t.Helper()
	var be *BoundError
	if !errors.As(err, &be) || !errors.Is(err, ErrBound) {
		t.Fatalf("%s: got %v, want the %s bound", what, err, bound)
	}
	if be.Bound != bound {
		t.Fatalf("%s: crossed the %s bound, want %s (%v)", what, be.Bound, bound, err)
	}
	if !strings.Contains(err.Error(), bound) {
		t.Fatalf("%s: %q does not name the bound", what, err)
	}
}

// Each template crosses one bound at Parse (in its text or its trial
// render) under the default limits or, where reaching a default would be
// slow, under the smaller limits given; each time the error names it.
func TestTemplatesBeyondABoundAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		limits    Limits
		bound     string
	}{
		{"source size", strings.Repeat("x", 1<<20+1), Limits{}, BoundSourceBytes},
		{"tag size", "{{ '" + strings.Repeat("x", 64<<10) + "' }}", Limits{}, BoundTagBytes},
		{"nested brackets", "{{ " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200) + " }}", Limits{}, BoundNesting},
		{"nested blocks", strings.Repeat("{% if true %}", 200) + strings.Repeat("{% endif %}", 200), Limits{}, BoundNesting},
		{"deeply nested source", strings.Repeat("{{ [", 1) + strings.Repeat("[", 30000) + strings.Repeat("]", 30001) + " }}", Limits{}, BoundNesting},
		{"a long operator chain", "{{ a" + strings.Repeat(" ~ a", 3000) + " }}", Limits{}, BoundOperators},
		{"macro recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", Limits{}, BoundRecursion},
		{"mutual recursion", "{% macro f(n) %}{{ g(n) }}{% endmacro %}{% macro g(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", Limits{}, BoundRecursion},
		{"call block recursion", "{% macro m() %}{{ caller() }}{% endmacro %}{% macro f() %}{% call m() %}{{ f() }}{% endcall %}{% endmacro %}{{ f() }}", Limits{}, BoundRecursion},
		{"huge range", "{% for i in range(10000000000) %}{{ i }}{% endfor %}", Limits{}, BoundRangeItems},
		{"huge range without a loop", "{{ range(10 ** 12)|length }}", Limits{}, BoundRangeItems},
		{"negative-step range", "{{ range(0, -9223372036854775807, -1)|length }}", Limits{}, BoundRangeItems},
		{"nested loops", "{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", Limits{Steps: 5000}, BoundSteps},
		{"loop over a long list", "{% set l = range(10000) %}{% for i in l if false %}{% endfor %}", Limits{Steps: 5000}, BoundSteps},
		{"printed output", "{% for i in range(1000) %}{{ 'x' * 1000 }}{% endfor %}", Limits{OutputBytes: 100000}, BoundOutputBytes},
		{"literal output", "{% for i in range(1000) %}" + strings.Repeat("y", 1000) + "{% endfor %}", Limits{OutputBytes: 100000}, BoundOutputBytes},
		{"string repetition", "{{ 'a' * 1000000000000 }}", Limits{}, BoundValueBytes},
		{"repetition of a repetition", "{{ ('a' * 10000) * 10000 }}", Limits{}, BoundValueBytes},
		{"doubling by ~", "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", Limits{}, BoundValueBytes},
		{"doubling by +", "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", Limits{}, BoundValueBytes},
		{"doubling a list", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", Limits{ValueBytes: 1 << 20}, BoundValueBytes},
		{"doubling through macro arguments", "{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('a') }}", Limits{}, BoundValueBytes},
		{"shared halves printed", "{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}", Limits{}, BoundValueBytes},
		{"join of a huge list", "{{ range(100000)|join('x' * 100000) }}", Limits{}, BoundValueBytes},
		{"replace of the empty string", "{{ ('a' * 1000000).replace('', 'b' * 100) }}", Limits{}, BoundValueBytes},
		{"replace filter", "{{ ('a' * 1000000)|replace('a', 'b' * 100) }}", Limits{}, BoundValueBytes},
		{"indent width", "{{ ('a\\n' * 100000)|indent(100000) }}", Limits{}, BoundValueBytes},
		{"format", "{{ ('{0}' * 1000000).format('x' * 1000) }}", Limits{}, BoundValueBytes},
		{"a value holding itself", "{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns }}", Limits{}, BoundValueDepth},
		{"a value holding itself through a list", "{% set ns = namespace(a=1) %}{% set ns.l = [1, [ns]] %}", Limits{}, BoundValueDepth},
		{"deeply nested data", "{% set ns = namespace(x=1) %}{% for i in range(3000) %}{% set ns.x = [ns.x] %}{% endfor %}", Limits{ValueDepth: 1000}, BoundValueDepth},
		{"slice far past the end", "{{ messages[1000000000000::-1] }}{{ messages[:1000000000000:2] }}{% for i in range(100000) %}{{ 'é'[-9223372036854775807:9223372036854775807] }}{% endfor %}", Limits{Steps: 150000}, BoundSteps},
		{"shared values stringified", "{% set ns = namespace(x='a' * 1000000) %}{% set l = [ns.x, ns.x, ns.x, ns.x, ns.x, ns.x, ns.x, ns.x] %}{{ [l, l, l, l, l, l]|string|length }}", Limits{}, BoundValueBytes},
		{"shared values in JSON", "{% set ns = namespace(x='a' * 1000000) %}{% set l = [ns.x, ns.x, ns.x, ns.x, ns.x, ns.x, ns.x, ns.x] %}{{ [l, l, l, l, l, l]|tojson|length }}", Limits{}, BoundValueBytes},
		{"an operator behind a byte the engine skips", "{{ 'a' *\x121000000000000 }}", Limits{}, BoundValueBytes},
		{"a filter behind a byte the engine skips", "{{ range(100000)|\x01join('x' * 100000) }}", Limits{}, BoundValueBytes},
		{"a method behind a byte the engine skips", "{{ ('a' * 1000000).\x7freplace('', 'b' * 100) }}", Limits{}, BoundValueBytes},
		{"a reserved name", "{% macro _sf_body() %}{% endmacro %}{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", Limits{}, BoundSandbox},
		{"a method taken uncalled", "{% set r = 'ab'.replace %}{{ r('', 'x' * 1000) }}", Limits{}, BoundSandbox},
		{"render time", "{% for i in range(10) %}{% endfor %}", Limits{Time: time.Nanosecond}, BoundTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.src, Options{Limits: tc.limits})
			wantBound(t, tc.name, err, tc.bound)
		})
	}
}

// A template within its bounds for a greeting can still cross one for a
// long conversation: that render alone fails, with a *BoundError, and the
// template goes on rendering other conversations.
func TestRenderBeyondABoundFailsThatRenderOnly(t *testing.T) {
	src := "{% for m in messages %}{% for i in range(100) %}{% endfor %}{{ m.content }}{% endfor %}"
	tmpl := mustParse(t, src, Options{Limits: Limits{Steps: 2000}})
	long := make([]Message, 40)
	for i := range long {
		long[i] = Message{Role: RoleUser, Content: "hi"}
	}
	_, err := tmpl.Render(long, false)
	wantBound(t, "40 messages", err, BoundSteps)
	got, err := tmpl.Render(long[:3], false)
	if err != nil || got != "hihihi" {
		t.Fatalf("3 messages after a refused render: %q, %v", got, err)
	}
}

// The calls that replace engine builtins give the builtins' results within
// the bounds: each template renders as written and as the engine alone
// renders it, unrewritten.
func TestSizedCallsMatchTheEngine(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{{ 'ab' * 3 }}|{{ 2 * 3 }}|{{ 1.5 * 2 }}|{{ 'a' * 0 }}", "ababab|6|3|"},
		{"{{ 1 + 2 * 3 }}|{{ 7 - 2 + 1 }}|{{ 'a' + 'b' ~ 1 + 2 }}|{{ [1] + [2] }}", "7|6|ab3|[1, 2]"},
		{"{{ 8 / 2 * 3 }}|{{ 2 * 3 ** 2 }}|{{ -2 * 3 }}|{{ 2 * -3 }}", "12|18|-6|-6"},
		{"{{ 'x' ~ 'yz'|upper * 2 }}|{{ ('a' ~ 'b') * 2 }}|{{ [1, 2]|join('-') }}", "xYZYZ|abab|1-2"},
		{"{{ range(3)|list }}|{{ range(1, 7, 2)|list }}|{{ range(3, 0, -1)|list }}|{{ range(0)|list }}", "[0, 1, 2]|[1, 3, 5]|[3, 2, 1]|[]"},
		{"{{ 'a-b-c'.replace('-', '+') }}|{{ 'a-b-c'|replace('-', '', 1) }}|{{ '{0}{1}{0}'.format('x', 'y') }}", "a+b+c|ab-c|xyx"},
		{"{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(width=1, first=true) }}", "a\n  b\n\n  c| a\n b"},
		{"{% set d = {'k': 'v'} %}{{ [d, d]|join(',', attribute='k') }}", "v,v"},
		{"{% set x = 1 if 2 * 2 == 4 else 0 %}{{ x }}{% if 'a' * 2 in 'aaa' %}!{% endif %}", "1!"},
		{"{% set l = [0, 1, 2, 3, 4, 5] %}{{ l[1:] }}{{ l[::-1] }}{{ l[-2:] }}{{ l[1:5:2] }}{{ l[-1:-5:-2] }}{{ l[10::-3] }}{{ l[:-10:-4] }}", "[1, 2, 3, 4, 5][5, 4, 3, 2, 1, 0][4, 5][1, 3][5, 3][4, 1][5, 1]"}, // l[10::-3] is [4, 1]: the engine does not clamp the start (Python gives [5, 2]),
		{"{% set s = 'héllo' %}{{ s[1:] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ 'abc'[::-1] }}|{{ 'abcdef'[-100:100:2] }}|{{ s[0] }}", "éllo|olléh|hlo|cba|ace|h"},
		{"{{ [1, 2, 3][:][0] }}{{ {'a': [1, 2]}['a'][1:] }}{{ ([1, 2] + [3])[1:] }}", "1[2][2, 3]"},
	} {
		tmpl := mustParse(t, tc.src, Options{})
		got, err := tmpl.Render([]Message{{Role: RoleUser, Content: "x"}}, false)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.src, got, err, tc.want)
		}
		engine, err := jinja.Compile(tc.src)
		if err != nil {
			t.Fatalf("%s: the engine: %v", tc.src, err)
		}
		if direct, err := engine.RenderValues(nil); err != nil || direct != tc.want {
			t.Errorf("%s: the engine alone renders %q, %v; want %q", tc.src, direct, err, tc.want)
		}
	}
}

// A negative repetition count gives "", as in Python, where the engine
// panics.
func TestNegativeRepetitionIsEmpty(t *testing.T) {
	tmpl := mustParse(t, "[{{ 'a' * -3 }}]", Options{})
	if got, err := tmpl.Render([]Message{{Role: RoleUser, Content: "x"}}, false); err != nil || got != "[]" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// The rewrite finds the operands of * as the engine groups them.
func TestRewriteArithKeepsPrecedence(t *testing.T) {
	for in, want := range map[string]string{
		" a * b ":            " _sf_mul(a, b) ",
		" a * b * c ":        " _sf_mul(_sf_mul(a, b), c) ",
		" a / b * c ":        " _sf_mul(a / b, c) ",
		" a + b * c ":        " _sf_add(a, _sf_mul(b, c)) ",
		" x.y(1)|f(2) * -z ": " _sf_mul(x.y(1)|f(2), -z) ",
		" a ~ b + c ~ d ":    " _sf_cat(_sf_cat(a, _sf_add(b, c)), d) ",
		" f(a * b, c) ":      " f(_sf_mul(a, b), c) ",
		" '*' ~ '+' ":        " _sf_cat('*', '+') ",
		" a * ":              " a * ",
		" x if a * b else y": " x if _sf_mul(a, b) else y",
	} {
		if got := rewriteArith(in); got != want {
			t.Errorf("rewriteArith(%q) = %q, want %q", in, got, want)
		}
	}
}
