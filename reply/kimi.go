package reply

import (
	"fmt"
	"strings"

	"superfluid/grammar"
)

// kimiCalls is Kimi K2's syntax: a section of calls, each with an id that
// carries the name, "functions.NAME:INDEX", and JSON arguments:
//
//	<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>…<|tool_calls_section_end|>
//
// The markers and the id's prefix are read from the probe's rendering.
type kimiCalls struct {
	begin, end      string // the section
	open, args, cls string // a call: before the id, between id and arguments, after them
	idPrefix        string // "functions."
}

func (k *kimiCalls) openers() []opener { return []opener{{text: k.begin}} }

func (k *kimiCalls) markers() []string { return []string{k.end, k.open, k.args, k.cls} }

func (k *kimiCalls) blockEnd(buf string, final bool) int {
	if i := strings.Index(buf, k.end); i >= 0 {
		return i + len(k.end)
	}
	if final {
		return len(buf)
	}
	return -1
}

func (k *kimiCalls) parse(block string) ([]ToolCall, error) {
	c := &cursor{s: block}
	if !c.lit(k.begin) {
		return nil, fmt.Errorf("the block does not open with %q", k.begin)
	}
	var out []ToolCall
	for !c.lit(k.end) {
		if c.blank() && len(out) > 0 {
			break // the model stopped before the section's end
		}
		if !c.lit(k.open) {
			return nil, fmt.Errorf("expected %q", k.open)
		}
		id, ok := c.until(k.args)
		if !ok {
			return nil, fmt.Errorf("a call id never ends")
		}
		id = strings.TrimSpace(id)
		name := strings.TrimPrefix(id, k.idPrefix)
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			name = name[:i]
		}
		if name == "" {
			return nil, fmt.Errorf("call id %q names no tool", id)
		}
		start := skipSpace(c.s, c.i)
		end := jsonEnd(c.s, start)
		if end < 0 {
			return nil, fmt.Errorf("call %q: the arguments are not a JSON object", name)
		}
		args, err := argumentsObject([]byte(c.s[start:end]))
		if err != nil {
			return nil, fmt.Errorf("call %q: %w", name, err)
		}
		c.i = end
		if !c.lit(k.cls) && !c.blank() {
			return nil, fmt.Errorf("call %q: expected %q", name, k.cls)
		}
		out = append(out, ToolCall{ID: id, Name: name, Arguments: args})
	}
	if !c.blank() {
		return nil, fmt.Errorf("text after the calls")
	}
	return out, nil
}

func (k *kimiCalls) grammar(tools []Tool, parallel bool, root string) (string, error) {
	if len(tools) == 0 {
		return "", fmt.Errorf("no tools to call")
	}
	var alts []string
	var rules strings.Builder
	for i, t := range tools {
		start, r, err := schemaRules(t.Parameters, fmt.Sprintf("%s-a%d", root, i))
		if len(t.Parameters) == 0 {
			start, r, err = schemaRules([]byte(`{"type":"object"}`), fmt.Sprintf("%s-a%d", root, i))
		}
		if err != nil {
			return "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		rules.WriteString(grammar.Prefixed(r, fmt.Sprintf("%s-t%d-", root, i)))
		alts = append(alts, fmt.Sprintf("%s [0-9]{1,3} %s %s-t%d-%s %s", grammar.Literal(k.open+k.idPrefix+t.Name+":"),
			grammar.Literal(k.args), root, i, start, grammar.Literal(k.cls)))
	}
	calls := root + "-call"
	if parallel {
		calls += " " + root + "-call*"
	}
	return fmt.Sprintf("%s ::= %s %s %s\n%s-call ::= %s\n%s", root, grammar.Literal(k.begin), calls, grammar.Literal(k.end),
		root, strings.Join(alts, " | "), rules.String()), nil
}

// probeKimi recognises the section of calls whose ids carry the name.
func probeKimi(p probe) (string, callSyntax, bool) {
	one, two := strings.TrimSpace(p.one), strings.TrimSpace(p.two)
	i := strings.Index(one, probeFnA+":0")
	b := strings.Index(two, probeFnB+":1")
	if i < 0 || b < 0 {
		return "", nil, false
	}
	j := strings.LastIndexByte(one[:i], '>') + 1
	k := &kimiCalls{idPrefix: one[j:i]}
	heads := splitAdjacent(strings.TrimSpace(one[:j]))
	if len(heads) != 2 {
		return "", nil, false
	}
	k.begin, k.open = heads[0], heads[1]
	rest := one[i+len(probeFnA)+2:]
	a := strings.IndexByte(rest, '{')
	if a <= 0 {
		return "", nil, false
	}
	k.args = strings.TrimSpace(rest[:a])
	e := jsonEnd(rest, a)
	if e < 0 {
		return "", nil, false
	}
	tails := splitAdjacent(strings.TrimSpace(rest[e:]))
	if len(tails) != 2 {
		return "", nil, false
	}
	k.cls, k.end = tails[0], tails[1]
	return "kimi-k2", k, true
}

// splitAdjacent splits special-token markers written back to back
// ("<|a|><|b|>") at each "><".
func splitAdjacent(s string) []string {
	var out []string
	for s != "" {
		i := strings.Index(s, "><")
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// kimiSourceSyntax is Kimi K2's syntax as its template's source spells
// it, for the templates that cannot render a call (see describedSyntax).
func kimiSourceSyntax() callSyntax {
	return &kimiCalls{begin: "<|tool_calls_section_begin|>", end: "<|tool_calls_section_end|>",
		open: "<|tool_call_begin|>", args: "<|tool_call_argument_begin|>", cls: "<|tool_call_end|>", idPrefix: "functions."}
}
