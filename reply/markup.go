package reply

import (
	"encoding/json"
	"strings"
)

// markupProbes recognise the syntaxes that write a call's arguments as
// markup: one element per parameter (Qwen3-Coder, GLM, MiniMax, DeepSeek
// V3.2's DSML) or channel headers (gpt-oss).
var markupProbes = []func(p probe) (string, callSyntax, bool){
	probeXMLParams,
	probeKimi,
	probeHarmony,
	probeGemma,
}

// typedSyntax is a syntax whose values are untyped text, read back as a
// string or as JSON by the declared schema of the tool.
type typedSyntax interface {
	parseTyped(block string, schemas map[string]json.RawMessage) ([]ToolCall, error)
}

// formatShaper is a syntax that sets more of the format than its calls
// (harmony's reasoning channel and dropped headers).
type formatShaper interface{ shape(f *Format) }

// parseBlock parses a call block with the request's schemas when the
// syntax can use them.
func (p *Parser) parseBlock(block string) ([]ToolCall, error) {
	if s, ok := p.f.calls.(typedSyntax); ok {
		return s.parseTyped(block, p.opts.Schemas)
	}
	return p.f.calls.parse(block)
}

// cursor reads a call block left to right, whitespace between markers
// being optional.
type cursor struct {
	s string
	i int
}

func (c *cursor) ws() { c.i = skipSpace(c.s, c.i) }

// blank reports whether only whitespace is left.
func (c *cursor) blank() bool { return strings.TrimSpace(c.s[c.i:]) == "" }

// lit consumes m after optional whitespace.
func (c *cursor) lit(m string) bool {
	j := skipSpace(c.s, c.i)
	if m == "" || !strings.HasPrefix(c.s[j:], m) {
		return false
	}
	c.i = j + len(m)
	return true
}

// until returns the text up to m and consumes both.
func (c *cursor) until(m string) (string, bool) {
	j := strings.Index(c.s[c.i:], m)
	if j < 0 {
		return "", false
	}
	v := c.s[c.i : c.i+j]
	c.i += j + len(m)
	return v, true
}

// word returns the text up to the next whitespace or '<'.
func (c *cursor) word() (string, bool) {
	c.ws()
	j := strings.IndexAny(c.s[c.i:], " \t\r\n<")
	if j < 0 {
		j = len(c.s) - c.i
	}
	v := c.s[c.i : c.i+j]
	c.i += j
	return v, v != ""
}

// narrowProbe cuts what a template writes around the calls out of the
// probe's renderings: a role header before them (Seed-OSS's "assistant")
// or an end-of-turn marker after (<seed:eos>, <|tool_response>), which
// the empty turn the probe compares with does not write.
func narrowProbe(s callSyntax, p probe) probe {
	cut := func(text string) string {
		start := -1
		for _, o := range s.openers() {
			if i := strings.Index(text, o.text); i >= 0 && (start < 0 || i < start) {
				start = i
			}
		}
		if start < 0 {
			return text
		}
		rest, end := text[start:], start
		for {
			n := s.blockEnd(rest, false)
			if n <= 0 {
				break
			}
			end += n
			next := strings.TrimLeft(rest[n:], " \t\r\n")
			if !opensWith(s, next) {
				break
			}
			end += len(rest[n:]) - len(next)
			rest = next
		}
		if end == start {
			return text
		}
		return text[start:end]
	}
	q := p // keeps single, contentLead and alt (P1)
	q.one, q.two = cut(p.one), cut(p.two)
	return q
}

func opensWith(s callSyntax, text string) bool {
	for _, o := range s.openers() {
		if strings.HasPrefix(text, o.text) {
			return true
		}
	}
	return false
}
