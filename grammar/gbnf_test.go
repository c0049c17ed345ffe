package grammar

import (
	"errors"
	"strings"
	"testing"
)

func mustGrammar(t *testing.T, text string) *Grammar {
	t.Helper()
	g, err := ParseGBNF(text)
	if err != nil {
		t.Fatalf("ParseGBNF: %v\n%s", err, text)
	}
	return g
}

func checkAccepts(t *testing.T, g *Grammar, yes, no []string) {
	t.Helper()
	for _, s := range yes {
		if !g.Accepts(s) {
			t.Errorf("refused %q", s)
		}
	}
	for _, s := range no {
		if g.Accepts(s) {
			t.Errorf("accepted %q", s)
		}
	}
}

func TestGBNFConstructs(t *testing.T) {
	cases := []struct {
		name, grammar string
		yes, no       []string
	}{
		{"literal escapes", `root ::= "a\"b\\c\n\x41\u00e9\U0001F600"`, []string{"a\"b\\c\nAé😀"}, []string{"a\"b\\c\nA", ""}},
		{"classes", `root ::= [a-c] [^a-c] [\]\-x] [\x00-\x1F]`, []string{"b!]\t", "aZ-\x00", "cdx\x1f"}, []string{"dd]\t", "aa]\t", "a!y\t", "a!] "}},
		{"any char", `root ::= . .`, []string{"ab", "é\n"}, []string{"a", "abc"}},
		{"repetition", `root ::= "a"{2,3} "b"{2} "c"{1,} "d"{0,1}`, []string{"aabbc", "aaabbcccd"}, []string{"abbc", "aaaabbc", "aabc", "aabb", "aabbcdd"}},
		{"star plus question", `root ::= "x"* "y"+ "z"?`, []string{"y", "xxyyz", "yy"}, []string{"", "x", "xz", "yzz"}},
		{"grouping and alternation", `root ::= ("ab" | "c")+ ("d" | )`, []string{"ab", "cabd", "ccc"}, []string{"", "a", "abdd", "d"}},
		{"multi-line group and comments", "# leading comment\nroot ::= (\n  \"a\" # first\n  | \"b\"\n) tail\ntail ::= \"!\" # done\n", []string{"a!", "b!"}, []string{"a", "c!"}},
		{"recursion", `root ::= "(" root ")" root | ""`, []string{"", "()", "(())()", "((()))"}, []string{"(", ")(", "(()"}},
		{"repeated literal is whole", `root ::= "ab"{2}`, []string{"abab"}, []string{"abb", "ab"}},
		{"empty literal", `root ::= "" "a" ""`, []string{"a"}, []string{""}},
		{"nullable chain", `root ::= a b "x"
a ::= "a"?
b ::= a a`, []string{"x", "ax", "aaax"}, []string{"aaaax"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkAccepts(t, mustGrammar(t, c.grammar), c.yes, c.no)
		})
	}
}

func TestGBNFErrors(t *testing.T) {
	cases := []struct {
		grammar   string
		line, col int
		msg       string
	}{
		{"root ::= foo\n", 1, 10, `undefined rule "foo"`},
		{"root ::= \"a\"\n\nx ::= \"\\q\"\n", 3, 8, "unknown escape"},
		{"root ::= \"abc\n", 2, 1, "unterminated"},
		{"root ::= [a-\n", 1, 11, "reversed"},
		{"root ::= [ab\n", 2, 1, "unterminated character class"},
		{"root ::= (\"a\" \n", 2, 1, "expecting ')'"},
		{"x ::= \"a\"\n", 1, 1, `no rule named "root"`},
		{"root ::= root \"a\" | \"b\"\n", 1, 1, "left recursion"},
		{"root ::= \"a\"{3,2}\n", 1, 13, "maximum below minimum"},
		{"root ::= \"a\"{2001}\n", 1, 13, "above 2000"},
		{"root \"a\"\n", 1, 6, "expecting ::="},
		{"root ::= \"a\" ]\n", 1, 14, "expecting newline"},
		{"root ::= \"a\"\nroot ::= \"b\"\n", 2, 1, "defined twice"},
		{"root ::= * \"a\"\n", 1, 10, "nothing before it"},
		{"root ::= <[12]>\n", 1, 10, "token references"},
	}
	for _, c := range cases {
		_, err := ParseGBNF(c.grammar)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: want a *ParseError, got %v", c.grammar, err)
			continue
		}
		if pe.Line != c.line || pe.Col != c.col || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("%q: got %v, want line %d col %d containing %q", c.grammar, err, c.line, c.col, c.msg)
		}
	}
}

// TestGBNFLeftRecursionThroughNullable mirrors llama.cpp, which refuses a
// rule reachable at its own left edge past nullable symbols too.
func TestGBNFLeftRecursionThroughNullable(t *testing.T) {
	_, err := ParseGBNF("root ::= a \"x\"\na ::= b root | \"y\"\nb ::= \"z\"?\n")
	if err == nil || !strings.Contains(err.Error(), "left recursion") {
		t.Fatalf("want a left-recursion error, got %v", err)
	}
}

// A few counts in a short text must not expand into a grammar llama.cpp
// would spend seconds and gigabytes compiling: the expanded size is bounded
// before the expansion is made.
func TestGBNFExpansionIsBounded(t *testing.T) {
	long := `"` + strings.Repeat("a", 200) + `"`
	for _, text := range []string{
		`root ::= ` + long + `{2000} ` + long + `{2000}`,
		`root ::= ` + strings.Repeat(`[a-z]{0,2000} `, 200),
	} {
		if _, err := ParseGBNF(text); err == nil || !strings.Contains(err.Error(), "symbols") {
			t.Errorf("%.60s…: %v, want a refusal of its expanded size", text, err)
		}
	}
	// At the bound's scale, ordinary grammars still parse.
	ok := `root ::= [a-z]{0,2000} " " [0-9]{1,2000}`
	if g, err := ParseGBNF(ok); err != nil || g.Size() > MaxSymbols {
		t.Fatalf("%s: %v", ok, err)
	}
}

func TestSchemaCountsAreBounded(t *testing.T) {
	for _, kw := range []string{"maxLength", "minLength"} {
		_, err := FromJSONSchema([]byte(`{"type":"string","`+kw+`":1000000}`), Options{})
		var u *UnsupportedError
		if !errors.As(err, &u) || u.Keyword != kw {
			t.Errorf("%s 1000000: %v, want an UnsupportedError naming %s", kw, err, kw)
		}
	}
	g, err := FromJSONSchema([]byte(`{"type":"string","maxLength":10000}`), Options{})
	if err != nil {
		t.Fatalf("maxLength 10000: %v", err)
	}
	if _, err := ParseGBNF(g); err != nil {
		t.Errorf("maxLength 10000 converts to a grammar the bound refuses: %v", err)
	}
}
