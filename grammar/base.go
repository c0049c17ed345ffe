package grammar

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// baseRules are the generic JSON rules, defined in a grammar only when used.
// Values carry no whitespace of their own: the containers put ws after each
// token, so the grammar has one place where whitespace may go.
var baseRules = map[string]string{
	"value":   `object | array | string | number | "true" | "false" | "null"`,
	"object":  `"{" ws ( member ( "," ws member )* )? "}"`,
	"member":  `string ws ":" ws value ws`,
	"array":   `"[" ws ( value ws ( "," ws value ws )* )? "]"`,
	"string":  `"\"" char* "\""`,
	"char":    `[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex-bmp )`,
	"hex-bmp": `[0-9a-cA-CeEfF] hex hex hex | [dD] [0-7] hex hex`,
	"hex":     `[0-9a-fA-F]`,
	"number":  `"-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?`,
	"integer": `"-"? ( "0" | [1-9] [0-9]* )`,
	// key-char is a character of a key as canonical JSON writes it (one
	// spelling per character), so a key can be told apart from a declared
	// name by its text.
	"key-char": `[^"\\\x00-\x1F] | "\\" ["\\bfnrt] | "\\u00" ( "0" [0-7bef] | "1" [0-9a-f] )`,
}

// base returns the name of a generic rule, defining it (and the rules it
// uses) on first use.
func (e *emitter) base(name string) string {
	if _, ok := e.bodies[name]; ok {
		return name
	}
	body, ok := baseRules[name]
	if name == "ws" {
		body, ok = `( " " | "\n" [ \t]{0,20} )?`, true
		switch {
		case e.cv.opts.CompactWhitespace:
			body = `""`
		case e.cv.opts.InlineWhitespace:
			body = `" "?`
		}
	}
	if !ok {
		panic("grammar: no base rule " + name)
	}
	e.bodies[name] = body
	e.byBody[body] = name
	e.order = append(e.order, name)
	for _, ref := range strings.Fields(body) {
		ref = strings.TrimRight(ref, "*+?")
		if _, isBase := baseRules[ref]; isBase || ref == "ws" {
			e.base(ref)
		}
	}
	return name
}

// Literal is s as a GBNF string literal, for callers that add rules of
// their own around a converted grammar.
func Literal(s string) string { return lit(s) }

// lit is s as a GBNF string literal.
func lit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// classChar is r as written inside a GBNF character class.
func classChar(r rune) string {
	switch {
	case r == '\\' || r == ']' || r == '[' || r == '-' || r == '^' || r == '"':
		return `\` + string(r)
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02X`, r)
	case r >= 0xD800 && r <= 0xDFFF || r > utf8.MaxRune:
		return fmt.Sprintf(`\U%08X`, r)
	case r > 0xFFFF:
		return fmt.Sprintf(`\U%08X`, r)
	case r > 0x7e:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r)
}

func class(ranges []rrange, negated bool) string {
	var b strings.Builder
	b.WriteByte('[')
	if negated {
		b.WriteByte('^')
	}
	for _, rg := range ranges {
		b.WriteString(classChar(rg[0]))
		if rg[1] != rg[0] {
			b.WriteByte('-')
			b.WriteString(classChar(rg[1]))
		}
	}
	b.WriteByte(']')
	return b.String()
}

// enum emits the values of an enum/const that also pass the schema's other
// constraints, each written compactly as canonical JSON.
func (e *emitter) enum(c *conj) (string, bool, error) {
	var alts uniqueStrings
	for _, v := range c.enum {
		ok, err := c.admitsLiteral(v)
		if err != nil {
			return "", false, err
		}
		if ok {
			x := lit(canonicalJSON(v))
			e.cv.work.spend(len(x))
			alts.add(x)
		}
	}
	return alternation(alts.list)
}

// admitsLiteral checks an enum value against the constraints beside the
// enum that the converter can check on a literal: type, number bounds,
// string length. Others beside an enum are refused.
func (c *conj) admitsLiteral(v any) (bool, error) {
	t := typeOfValue(v)
	if c.types&t == 0 {
		return false, nil
	}
	switch {
	case c.hasPattern || c.format != "":
		return false, unsupported(c.path, "enum", "enum or const together with pattern or format is not supported")
	case c.objectConstrained() || c.arrayConstrained():
		return false, unsupported(c.path, "enum", "enum or const together with object or array keywords is not supported")
	}
	switch x := v.(type) {
	case json.Number:
		if !c.numberBounded() {
			break
		}
		r, ok := numberRat(x)
		if !ok {
			return false, unsupported(c.path, "enum", "the value %.40s is too long, too large or too small to compare with minimum or maximum exactly (at most %d digits)", x, maxNumberDigits)
		}
		if c.lo != nil && (r.Cmp(c.lo) < 0 || c.loExcl && r.Cmp(c.lo) == 0) {
			return false, nil
		}
		if c.hi != nil && (r.Cmp(c.hi) > 0 || c.hiExcl && r.Cmp(c.hi) == 0) {
			return false, nil
		}
	case string:
		n := utf8.RuneCountInString(x)
		if n < c.minLen || c.maxLen >= 0 && n > c.maxLen {
			return false, nil
		}
	}
	return true, nil
}

func typeOfValue(v any) typeMask {
	switch x := v.(type) {
	case nil:
		return tNull
	case bool:
		return tBool
	case string:
		return tString
	case []any:
		return tArray
	case *object:
		return tObject
	case json.Number:
		if parseDecimal(string(x)).isInt() {
			return tInteger
		}
		return tFraction
	}
	return 0
}
