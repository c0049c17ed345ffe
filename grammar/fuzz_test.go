package grammar

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseGBNF: no text panics the parser or passes its bounds; what
// parses is within MaxSymbols. The seeds include the hostile shapes of
// issue 21 (nesting, a long chain of rules), small enough to fuzz from.
func FuzzParseGBNF(f *testing.F) {
	for _, s := range []string{
		`root ::= "a"`, `root ::= ("a" | "b")+ "c"?`, "root ::= x{2,5}\nx ::= [a-z]", `root ::= [^"\\]* # c`,
		`root ::= "a"{2001}`, "root ::= x\nx ::= x \"a\"", `root ::= ("a"{0,2000}){0,2000}`, "root ::= (\n\"a\"\n)",
		deepGBNF(MaxGBNFNesting), deepGBNF(MaxGBNFNesting + 1), deepGBNF(3000), chainGBNF(2000),
		`root ::= "(" [(] # (` + "\n", `root ::= "\(" ")"`, "root ::= a3 \"x\"\na0 ::= \"\"\na1 ::= a0 a0\na2 ::= a1 a1\na3 ::= a2 a2\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		g, err := ParseGBNF(text)
		if err != nil {
			var pe *ParseError
			var le *LimitError
			if !errors.As(err, &pe) && !errors.As(err, &le) {
				t.Fatalf("%q: %T %v, want a *ParseError or *LimitError", text, err, err)
			}
			return
		}
		if g.Size() > MaxSymbols {
			t.Fatalf("%q: %d symbols parsed, past MaxSymbols", text, g.Size())
		}
	})
}

// FuzzFromJSONSchema: no schema panics the converter; every grammar it
// writes parses, unless it is past a bound of the GBNF's (its repetitions
// expand past MaxSymbols, or its rules chain past MaxRuleChain) or refers
// to itself at its own left edge: {"allOf":[{"$ref":"#"}]} is written as
// schema ::= schema, which the parser (as llama.cpp's) refuses as left
// recursion — a 400 from the engine's check, a converter gap still open.
func FuzzFromJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]+(-[0-9]{2,4})?$"}},"required":["a"]}`,
		`{"anyOf":[{"type":"integer","minimum":-5,"exclusiveMaximum":1e3},{"enum":["x",null,[1]]}]}`,
		`{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`,
		`{"allOf":[{"enum":[1,2,3.0]},{"enum":[3,"3",1e0]}]}`, `{"oneOf":[{"const":1},{"const":"1"}]}`,
		`{"type":"array","prefixItems":[{"type":"string","format":"date"},true,false]}`,
		enumIntersection(50), deepPattern(MaxPatternNesting + 1), refDoubling(8), refChain(50), longPropertyName(300), oneOfConsts(30), nestedSchema(20),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		text, err := FromJSONSchema([]byte(schema), Options{})
		if err != nil {
			var u *UnsupportedError
			var s *SchemaError
			var le *LimitError
			if !errors.As(err, &u) && !errors.As(err, &s) && !errors.As(err, &le) && !errors.Is(err, ErrUnsatisfiable) {
				t.Fatalf("%s: %T %v", schema, err, err)
			}
			return
		}
		if _, err := ParseGBNF(text); err != nil {
			var pe *ParseError
			var le *LimitError
			if !errors.As(err, &le) && (!errors.As(err, &pe) || !strings.Contains(pe.Msg, "symbols") && !strings.Contains(pe.Msg, "left recursion")) {
				t.Fatalf("%s: the grammar does not parse: %v\n%s", schema, err, text)
			}
		}
	})
}
