package grammar

import (
	"errors"
	"strings"
	"testing"
)

func TestRecursiveRef(t *testing.T) {
	g := schemaGrammar(t, `{
		"$defs": {"node": {"type": "object",
			"properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
			"required": ["value"], "additionalProperties": false}},
		"$ref": "#/$defs/node"}`, Options{})
	checkAccepts(t, g,
		[]string{`{"value":1}`, `{"value":1,"children":[]}`, `{"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4}]}`},
		[]string{`{}`, `{"children":[]}`, `{"value":1,"children":[{"value":"x"}]}`, `{"value":1,"children":[{"value":2,"extra":0}]}`, `{"children":[],"value":1}`})
	// a root that refers to itself
	g = schemaGrammar(t, `{"type":["array","integer"],"items":{"$ref":"#"}}`, Options{})
	checkAccepts(t, g, []string{`1`, `[]`, `[1,[2,[[]]]]`}, []string{`["a"]`, `[1,[2,["x"]]]`})
}

func TestRecursiveRefWithSiblingsRefused(t *testing.T) {
	_, err := FromJSONSchema([]byte(`{"$defs":{"a":{"$ref":"#/$defs/a","type":"object"}},"$ref":"#/$defs/a"}`), Options{})
	var u *UnsupportedError
	if !errors.As(err, &u) || u.Keyword != "$ref" {
		t.Fatalf("want an UnsupportedError for $ref, got %v", err)
	}
}

func TestObjectsAndOrder(t *testing.T) {
	schema := `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"boolean"}},"required":["a"],
		"additionalProperties":{"type":"integer"}}`
	g := schemaGrammar(t, schema, Options{})
	checkAccepts(t, g,
		[]string{`{"a":true}`, `{"b":"x","a":false}`, `{"b":"x","a":false,"c":1,"bb":2}`, `{"a":true,"":3}`, `{ "b" : "x" ,` + "\n    " + `"a" : true }`},
		[]string{`{}`, `{"a":true,"b":"x"}`, `{"a":true,"c":"x"}`, `{"a":true,"a":1}`, `{"a":true,"b":1}`, `{"a":true}  `})
	// whitespace is bounded: a newline and at most 20 blanks
	checkAccepts(t, g, []string{"{\n" + strings.Repeat(" ", 20) + `"a":true}`}, []string{"{\n" + strings.Repeat(" ", 21) + `"a":true}`, `{  "a":true}`})
	g = schemaGrammar(t, schema, Options{CompactWhitespace: true})
	checkAccepts(t, g, []string{`{"b":"x","a":false}`}, []string{`{ "a":true}`})
	g = schemaGrammar(t, schema, Options{InlineWhitespace: true})
	checkAccepts(t, g, []string{`{"b": "x", "a": false}`, `{"a":true}`}, []string{"{\n\"a\":true}", `{  "a":true}`})
}

// TestRuleNamesFromProperties: properties named like the generic rules get
// rules of their own.
func TestRuleNamesFromProperties(t *testing.T) {
	g := schemaGrammar(t, `{"properties":{"value":{"const":1},"string":{"const":2},"ws":{"const":3},"fmt-date":{"const":4},"root":{"const":5}},"additionalProperties":false}`, Options{})
	checkAccepts(t, g, []string{`{"value":1,"string":2,"ws":3,"fmt-date":4,"root":5}`, `{}`}, []string{`{"value":"x"}`, `{"string":1}`})
}

func TestStrictAdditionalProperties(t *testing.T) {
	schema := `{"type":"object","properties":{"a":{"type":"integer"}}}`
	checkAccepts(t, schemaGrammar(t, schema, Options{}), []string{`{"a":1,"b":2}`, `{}`}, nil)
	checkAccepts(t, schemaGrammar(t, schema, Options{Strict: true}), []string{`{"a":1}`, `{}`}, []string{`{"a":1,"b":2}`})
	schema = `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true}`
	checkAccepts(t, schemaGrammar(t, schema, Options{Strict: true}), []string{`{"a":1,"b":2}`}, nil)
}

// TestExtraKeysNotDeclared: an undeclared key never spells a declared
// name, escapes included, so a declared property cannot be smuggled in
// through additionalProperties.
func TestExtraKeysNotDeclared(t *testing.T) {
	g := schemaGrammar(t, `{"properties":{"a\"b":{"const":1},"ab":{"const":2}},"additionalProperties":{"type":"string"}}`, Options{})
	checkAccepts(t, g,
		[]string{`{"a\"b":1,"ab":2}`, `{"x":"y"}`, `{"a\"":"y"}`, `{"a\"bc":"y"}`, `{"a\\b":"y"}`, `{"abc":"y"}`},
		[]string{`{"a\"b":"y"}`, `{"ab":"y"}`, `{"a\u0022b":"y"}`})
}

func TestArrays(t *testing.T) {
	g := schemaGrammar(t, `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"minItems":1,"maxItems":4}`, Options{})
	checkAccepts(t, g,
		[]string{`[1]`, `[1,"a"]`, `[1,"a",true,false]`, `[ 1 , "a" ]`},
		[]string{`[]`, `["a"]`, `[1,2]`, `[1,"a",true,false,true]`, `[1,"a",3]`})
	g = schemaGrammar(t, `{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`, Options{})
	checkAccepts(t, g, []string{`[1,2]`, `[1,2,3]`}, []string{`[1]`, `[1,2,3,4]`, `[]`})
	g = schemaGrammar(t, `{"type":"array","prefixItems":[true,true],"items":false}`, Options{})
	checkAccepts(t, g, []string{`[]`, `[1]`, `[1,{}]`}, []string{`[1,2,3]`})
}

func TestStringsAndPatterns(t *testing.T) {
	g := schemaGrammar(t, `{"type":"string","minLength":2,"maxLength":3}`, Options{})
	checkAccepts(t, g, []string{`"ab"`, `"é😀"`, `"a\nb"`, `"\u00e9\"x"`}, []string{`"a"`, `"abcd"`, `"a\qb"`, `"\ud800x"`})
	cases := []struct {
		pattern string
		yes, no []string
	}{
		{`^[a-z]+\d{2,3}$`, []string{`"ab12"`, `"x123"`}, []string{`"ab1"`, `"ab1234"`, `"Ab12"`, `" ab12"`}},
		{`ab`, []string{`"ab"`, `"xxabyy"`, `"\nab"`}, []string{`"a"`, `"ba"`}},
		{`^a|b$`, []string{`"axx"`, `"xxb"`}, []string{`"xax"`, `"bx"`}},
		{`^"\\$`, []string{`"\"\\"`}, []string{`"\"\\\\"`, `"x"`}},
		{`^[^a]$`, []string{`"b"`, `"\""`, `"\n"`, `"é"`}, []string{`"a"`, `"bb"`}},
		{`^(?:ab|c)*.$`, []string{`"x"`, `"ababcx"`}, []string{`"abab"`, `"ab\n"`}},
		{`^\w+@\w+\.(com|org)$`, []string{`"a@b.com"`, `"x_1@y.org"`}, []string{`"a@b.net"`, `"a@b_com"`}},
	}
	for _, c := range cases {
		g := schemaGrammar(t, `{"type":"string","pattern":`+jsonQuote(c.pattern)+`}`, Options{})
		t.Run(c.pattern, func(t *testing.T) { checkAccepts(t, g, c.yes, c.no) })
	}
	for _, bad := range []string{`(?=a)`, `(a)\1`, `a^b`, `\bword`, `\p{L}`, `[z-a]`, `(a`} {
		_, err := FromJSONSchema([]byte(`{"pattern":`+jsonQuote(bad)+`}`), Options{})
		var u *UnsupportedError
		if !errors.As(err, &u) || u.Keyword != "pattern" {
			t.Errorf("pattern %s: want an UnsupportedError for pattern, got %v", bad, err)
		}
	}
}

func jsonQuote(s string) string { return `"` + jsonStringBody(s) + `"` }

func TestFormats(t *testing.T) {
	cases := map[string][2][]string{
		"date":      {{`"2020-02-29"`, `"2000-02-29"`, `"1999-12-31"`}, {`"2021-02-29"`, `"1900-02-29"`, `"2020-04-31"`, `"2020-13-01"`, `"20-01-01"`}},
		"time":      {{`"08:30:06Z"`, `"23:59:60Z"`, `"12:00:00.5+05:30"`, `"01:02:03z"`}, {`"24:00:00Z"`, `"12:00:00"`, `"22:59:60Z"`, `"12:00:00+24:00"`}},
		"date-time": {{`"1963-06-19T08:30:06.283185Z"`, `"1963-06-19t08:30:06z"`}, {`"1963-06-19 08:30:06Z"`, `"1963-06-19T08:30:06"`}},
		"uuid":      {{`"2eb8aa08-AA98-11ea-b4aa-73b441d16380"`}, {`"2eb8aa08aa9811eab4aa73b441d16380"`, `"2eb8aa08-aa98-11ea-b4aa-73b441d1638"`}},
		"email":     {{`"joe.bloggs@example.com"`, `"\"joe bloggs\"@example.com"`, `"a@[127.0.0.1]"`}, {`".a@example.com"`, `"a..b@example.com"`, `"a@"`, `"a@[256.0.0.1]"`}},
	}
	for format, c := range cases {
		g := schemaGrammar(t, `{"type":"string","format":"`+format+`"}`, Options{})
		t.Run(format, func(t *testing.T) { checkAccepts(t, g, c[0], c[1]) })
	}
}

func TestCombinators(t *testing.T) {
	g := schemaGrammar(t, `{"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"a":{"minimum":5},"b":{"type":"string"}}}]}`, Options{})
	checkAccepts(t, g, []string{`{"a":5}`, `{"a":7,"b":"x"}`, `"anything"`}, []string{`{"a":4}`, `{"b":"x"}`, `{"a":5,"b":1}`})
	g = schemaGrammar(t, `{"type":"string","anyOf":[{"maxLength":1},{"minLength":3}]}`, Options{})
	checkAccepts(t, g, []string{`""`, `"a"`, `"abc"`}, []string{`"ab"`, `1`})
	g = schemaGrammar(t, `{"oneOf":[{"type":"string"},{"type":"integer","minimum":0}],"nullable":true}`, Options{})
	checkAccepts(t, g, []string{`"x"`, `3`, `null`}, []string{`-1`, `1.5`, `true`})
	g = schemaGrammar(t, `{"type":"string","enum":["a","b",3]}`, Options{})
	checkAccepts(t, g, []string{`"a"`, `"b"`}, []string{`3`, `"c"`})
}

func TestRefusals(t *testing.T) {
	cases := map[string]string{
		`{"patternProperties":{"^x":{}}}`:                       "patternProperties",
		`{"properties":{"x":{"not":{}}}}`:                       "not",
		`{"oneOf":[{"type":"string"},{"minLength":2}]}`:         "oneOf",
		`{"uniqueItems":true}`:                                  "uniqueItems",
		`{"format":"hostname"}`:                                 "format",
		`{"$ref":"http://example.com/s.json"}`:                  "$ref",
		`{"type":"string","pattern":"^a$","maxLength":3}`:       "maxLength",
		`{"$schema":"http://example.com/custom","type":"null"}`: "$schema",
		`{"minimum":1e999999999}`:                               "minimum",
		`{"maxLength":4294967296}`:                              "maxLength",
	}
	for schema, kw := range cases {
		_, err := FromJSONSchema([]byte(schema), Options{})
		var u *UnsupportedError
		if !errors.As(err, &u) || u.Keyword != kw {
			t.Errorf("%s: want an UnsupportedError naming %q, got %v", schema, kw, err)
		}
	}
	_, err := FromJSONSchema([]byte(`{"properties":{"x":{"not":{}}}}`), Options{})
	if u := (*UnsupportedError)(nil); !errors.As(err, &u) || u.Path != "/properties/x" {
		t.Errorf("want the path of the refused keyword, got %v", err)
	}
	for _, schema := range []string{`false`, `{"type":"integer","minimum":5,"maximum":4}`, `{"allOf":[{"type":"string"},{"type":"null"}]}`} {
		if _, err := FromJSONSchema([]byte(schema), Options{}); !errors.Is(err, ErrUnsatisfiable) {
			t.Errorf("%s: want ErrUnsatisfiable, got %v", schema, err)
		}
	}
	for _, schema := range []string{`{"type":5}`, `{"minLength":-1}`, `{"$ref":"#/nowhere"}`, `{`, `{"a":1,"a":2}`} {
		var se *SchemaError
		if _, err := FromJSONSchema([]byte(schema), Options{}); !errors.As(err, &se) {
			t.Errorf("%s: want a SchemaError, got %v", schema, err)
		}
	}
}
