package reply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"superfluid/grammar"
)

// gemmaCalls is Gemma 4's syntax: each call its own block, the arguments
// in Gemma's own notation — bare keys, strings between <|"|> quotes, and
// otherwise numbers, true, false, {…} and […] as in JSON:
//
//	<|tool_call>call:NAME{city:<|"|>Paris<|"|>,days:3}<tool_call|>
//
// The markers and the quote are read from the probe's rendering.
type gemmaCalls struct {
	open, prefix, close string // "<|tool_call>", "call:", "<tool_call|>"
	quote               string // `<|"|>`
}

func (g *gemmaCalls) openers() []opener { return []opener{{text: g.open}} }

func (g *gemmaCalls) markers() []string { return []string{g.close, g.quote} }

func (g *gemmaCalls) blockEnd(buf string, final bool) int {
	// The closer cannot occur inside a quoted string without the string
	// ending first, so the first closer after the quotes are balanced ends
	// the block.
	from := 0
	for {
		i := strings.Index(buf[from:], g.close)
		if i < 0 {
			if final {
				return len(buf)
			}
			return -1
		}
		end := from + i + len(g.close)
		if strings.Count(buf[:from+i], g.quote)%2 == 0 {
			return end
		}
		from = end
	}
}

func (g *gemmaCalls) parse(block string) ([]ToolCall, error) {
	c := &cursor{s: block}
	if !c.lit(g.open) || !c.lit(g.prefix) {
		return nil, fmt.Errorf("the call does not open with %q", g.open+g.prefix)
	}
	j := strings.IndexByte(c.s[c.i:], '{')
	if j <= 0 {
		return nil, fmt.Errorf("the call has no name or no arguments")
	}
	name := strings.TrimSpace(c.s[c.i : c.i+j])
	c.i += j
	var out bytes.Buffer
	if err := g.value(c, &out, true); err != nil {
		return nil, fmt.Errorf("call %q: %w", name, err)
	}
	if !c.lit(g.close) && !c.blank() {
		return nil, fmt.Errorf("call %q: expected %q", name, g.close)
	}
	if !c.blank() {
		return nil, fmt.Errorf("text after the call")
	}
	return []ToolCall{{Name: name, Arguments: json.RawMessage(out.Bytes())}}, nil
}

// value converts one Gemma value at the cursor to JSON; key: a bare word
// is a key (of an object) rather than a literal.
func (g *gemmaCalls) value(c *cursor, out *bytes.Buffer, object bool) error {
	c.ws()
	rest := c.s[c.i:]
	switch {
	case strings.HasPrefix(rest, g.quote):
		c.i += len(g.quote)
		s, ok := c.until(g.quote)
		if !ok {
			return fmt.Errorf("a string never ends")
		}
		b, _ := json.Marshal(s)
		out.Write(b)
	case strings.HasPrefix(rest, "{"):
		c.i++
		out.WriteByte('{')
		for n := 0; !c.lit("}"); n++ {
			if n > 0 && !c.lit(",") {
				return fmt.Errorf("expected ',' or '}'")
			}
			if n > 0 {
				out.WriteByte(',')
			}
			c.ws()
			var key string
			if strings.HasPrefix(c.s[c.i:], g.quote) {
				c.i += len(g.quote)
				k, ok := c.until(g.quote)
				if !ok {
					return fmt.Errorf("a key never ends")
				}
				key = k
			} else {
				k := strings.IndexByte(c.s[c.i:], ':')
				if k <= 0 {
					return fmt.Errorf("a key has no value")
				}
				key = strings.TrimSpace(c.s[c.i : c.i+k])
				c.i += k
			}
			if !c.lit(":") {
				return fmt.Errorf("key %q has no value", key)
			}
			b, _ := json.Marshal(key)
			out.Write(b)
			out.WriteByte(':')
			if err := g.value(c, out, false); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	case object:
		return fmt.Errorf("the arguments are not an object")
	case strings.HasPrefix(rest, "["):
		c.i++
		out.WriteByte('[')
		for n := 0; !c.lit("]"); n++ {
			if n > 0 && !c.lit(",") {
				return fmt.Errorf("expected ',' or ']'")
			}
			if n > 0 {
				out.WriteByte(',')
			}
			if err := g.value(c, out, false); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	default:
		k := strings.IndexAny(rest, ",}]")
		if k <= 0 {
			return fmt.Errorf("a value never ends")
		}
		word := strings.TrimSpace(rest[:k])
		switch word {
		case "None", "null":
			word = "null"
		case "True":
			word = "true"
		case "False":
			word = "false"
		}
		if !json.Valid([]byte(word)) || strings.HasPrefix(word, `"`) {
			return fmt.Errorf("%q is not a value", word)
		}
		out.WriteString(word)
		c.i += k
	}
	return nil
}

// grammar: one block per call, each declared parameter in the schema's
// order (required ones always). Strings, numbers, integers and booleans
// are exact; other values are any Gemma value, not held to their schema.
func (g *gemmaCalls) grammar(tools []Tool, parallel bool, root string) (string, error) {
	if len(tools) == 0 {
		return "", fmt.Errorf("no tools to call")
	}
	q := grammar.Literal(g.quote)
	var rules strings.Builder
	fmt.Fprintf(&rules, "%s-str ::= %s ( [^<] | \"<\" [^|] )* %s\n", root, q, q)
	fmt.Fprintf(&rules, "%s-num ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n", root)
	fmt.Fprintf(&rules, "%s-int ::= \"-\"? ( \"0\" | [1-9] [0-9]* )\n", root)
	fmt.Fprintf(&rules, "%s-bool ::= \"true\" | \"false\"\n", root)
	fmt.Fprintf(&rules, "%s-any ::= %s-str | %s-num | %s-bool | \"{\" ( %s-member ( \",\" %s-member )* )? \"}\" | \"[\" ( %s-any ( \",\" %s-any )* )? \"]\"\n",
		root, root, root, root, root, root, root, root)
	fmt.Fprintf(&rules, "%s-member ::= [a-zA-Z_] [a-zA-Z0-9_]* \":\" %s-any\n", root, root)
	kinds := map[string]string{"string": "-str", "number": "-num", "integer": "-int", "boolean": "-bool"}
	var alts []string
	for i, t := range tools {
		props, required, err := orderedProperties(t.Parameters)
		if err != nil {
			return "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		types := propertyTypes(t.Parameters)
		name := fmt.Sprintf("%s-t%d", root, i)
		var members []string
		var opt []bool
		for _, p := range props {
			kind, ok := kinds[types[p.key]]
			if !ok {
				kind = "-any"
			}
			members = append(members, fmt.Sprintf("%s %s%s", grammar.Literal(p.key+":"), root, kind))
			opt = append(opt, !required[p.key])
		}
		body := fmt.Sprintf(`( %s-member ( "," %s-member )* )?`, root, root)
		if props != nil {
			body = name + "-s0"
			writeCommaList(&rules, name, members, opt)
		}
		fmt.Fprintf(&rules, "%s ::= %s \"{\" %s \"}\" %s\n", name, grammar.Literal(g.open+g.prefix+t.Name), body, grammar.Literal(g.close))
		alts = append(alts, name)
	}
	top := root + "-call"
	if parallel {
		top += " " + root + "-call*"
	}
	return fmt.Sprintf("%s ::= %s\n%s-call ::= %s\n%s", root, top, root, strings.Join(alts, " | "), rules.String()), nil
}

// shape gives the format Gemma 4's thought channel.
func (g *gemmaCalls) shape(f *Format) {
	if f.think == nil {
		f.think = &thinkMarkers{open: "<|channel>thought", close: "<channel|>"}
	}
}

// probeGemma recognises NAME{key:QUOTEvalueQUOTE} between markers.
func probeGemma(p probe) (string, callSyntax, bool) {
	one := strings.TrimSpace(p.one)
	a := strings.Index(one, probeFnA+"{probe_arg:")
	if a < 0 {
		return "", nil, false
	}
	head := one[:a]
	k := strings.IndexByte(head, '>')
	if k < 0 {
		return "", nil, false
	}
	g := &gemmaCalls{open: head[:k+1], prefix: head[k+1:]}
	rest := one[a+len(probeFnA+"{probe_arg:"):]
	v := strings.Index(rest, "probe_value")
	if v <= 0 || !strings.HasPrefix(rest[v+len("probe_value"):], rest[:v]+"}") {
		return "", nil, false
	}
	g.quote = rest[:v]
	after := rest[v+len("probe_value")+len(g.quote)+1:]
	if e := strings.IndexByte(after, '>'); e > 0 {
		g.close = after[:e+1]
	} else {
		return "", nil, false
	}
	return "gemma4", g, true
}

// writeCommaList writes the rules NAME-sK (the members from K on, the
// first present one without a comma) and NAME-tK (the members from K on,
// each after a comma), so that optional members leave no stray comma.
func writeCommaList(out *strings.Builder, name string, members []string, optional []bool) {
	n := len(members)
	fmt.Fprintf(out, "%s-s%d ::= \"\"\n%s-t%d ::= \"\"\n", name, n, name, n)
	for k := n - 1; k >= 0; k-- {
		start := fmt.Sprintf("%s %s-t%d", members[k], name, k+1)
		tail := fmt.Sprintf("\",\" %s %s-t%d", members[k], name, k+1)
		if optional[k] {
			start += fmt.Sprintf(" | %s-s%d", name, k+1)
			tail += fmt.Sprintf(" | %s-t%d", name, k+1)
		}
		fmt.Fprintf(out, "%s-s%d ::= %s\n%s-t%d ::= %s\n", name, k, start, name, k, tail)
	}
}
