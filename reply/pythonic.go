package reply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"superfluid/grammar"
)

// pythonic writes calls as a Python list of calls with keyword
// arguments between markers: LFM2's
// <|tool_call_start|>[get_weather(city='Paris'), …]<|tool_call_end|>.
type pythonic struct{ open, close string }

func (p *pythonic) openers() []opener { return []opener{{text: p.open}} }

func (p *pythonic) markers() []string {
	if p.close == "" {
		return nil
	}
	return []string{p.close}
}

func (p *pythonic) blockEnd(buf string, final bool) int {
	end := jsonEnd(buf, len(p.open))
	switch {
	case end == -2:
		return skipSpace(buf, len(p.open))
	case end < 0:
		return -1
	case p.close == "":
		return end
	}
	after := skipSpace(buf, end)
	full, partial := hasPrefixOrIsPrefix(buf[after:], p.close)
	switch {
	case full:
		return after + len(p.close)
	case partial && !final:
		return -1
	}
	return end
}

func (p *pythonic) parse(block string) ([]ToolCall, error) {
	body := strings.TrimSpace(strings.TrimPrefix(block, p.open))
	if p.close != "" {
		body = strings.TrimSpace(strings.TrimSuffix(body, p.close))
	}
	inner, ok := strings.CutPrefix(body, "[")
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return nil, fmt.Errorf("the calls are not a Python list")
	}
	var out []ToolCall
	r := pyReader{s: inner}
	for r.skip(); r.i < len(r.s); r.skip() {
		j := r.i
		for j < len(r.s) && (isIdentChar(r.s[j]) || r.s[j] == '.') {
			j++
		}
		name := r.s[r.i:j]
		if name == "" || j >= len(r.s) || r.s[j] != '(' {
			return nil, fmt.Errorf("a call is not written name(arguments)")
		}
		// The arguments run to the parenthesis that closes them, found
		// by reading the values: a string may hold one.
		start := j + 1
		r.i = start
		for r.skip(); r.i < len(r.s) && r.s[r.i] != ')'; r.skip() {
			for r.i < len(r.s) && r.s[r.i] != '=' && r.s[r.i] != ')' {
				r.i++
			}
			if r.i >= len(r.s) || r.s[r.i] == ')' {
				break
			}
			r.i++
			if _, err := r.value(); err != nil {
				return nil, fmt.Errorf("call %q: %w", name, err)
			}
			if r.skip(); r.i < len(r.s) && r.s[r.i] == ',' {
				r.i++
			}
		}
		if r.i >= len(r.s) {
			return nil, fmt.Errorf("call %q does not close", name)
		}
		args, err := pyKwargs(r.s[start:r.i])
		if err != nil {
			return nil, fmt.Errorf("call %q: %w", name, err)
		}
		out = append(out, ToolCall{Name: name, Arguments: args})
		r.i++ // )
		if r.skip(); r.i < len(r.s) && r.s[r.i] == ',' {
			r.i++
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the call list is empty")
	}
	return out, nil
}

// grammar holds each call to its tool's declared properties, the
// required ones first in the schema's order, then any optional ones;
// each value is JSON matching its property's schema, which Python reads
// (true, false and null are taken as Python's).
func (p *pythonic) grammar(tools []Tool, parallel bool, root string) (string, error) {
	if len(tools) == 0 {
		return "", fmt.Errorf("no tools to call")
	}
	var rules strings.Builder
	var alts []string
	for i, t := range tools {
		args, err := p.argsRule(t, fmt.Sprintf("%s-t%d", root, i), &rules)
		if err != nil {
			return "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		alts = append(alts, fmt.Sprintf(`%s "(" %s ")"`, grammar.Literal(t.Name), args))
	}
	call := root + "-call"
	fmt.Fprintf(&rules, "%s ::= %s\n", call, strings.Join(alts, " | "))
	body := call
	if parallel {
		body = fmt.Sprintf(`%s ( ", " %s )*`, call, call)
	}
	block := fmt.Sprintf(`%s "[" %s "]"`, grammar.Literal(p.open), body)
	if p.close != "" {
		block += " " + grammar.Literal(p.close)
	}
	return fmt.Sprintf("%s ::= %s\n%s", root, block, rules.String()), nil
}

// argsRule writes the rules of one tool's keyword arguments and returns
// the expression that matches them.
func (p *pythonic) argsRule(t Tool, prefix string, rules *strings.Builder) (string, error) {
	var schema struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if len(bytes.TrimSpace(t.Parameters)) > 0 {
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return "", fmt.Errorf("parameters: %w", err)
		}
	}
	props, err := orderedKeys(schema.Properties)
	if err != nil {
		return "", err
	}
	required := map[string]bool{}
	for _, r := range schema.Required {
		required[r] = true
	}
	var req, opt []string
	for i, kv := range props {
		if !isPyIdent(kv.key) {
			return "", fmt.Errorf("property %q is not a Python name", kv.key)
		}
		val, r, err := schemaRules(kv.value, fmt.Sprintf("%s-p%d", prefix, i))
		if err != nil {
			return "", fmt.Errorf("property %q: %w", kv.key, err)
		}
		rules.WriteString(r)
		item := fmt.Sprintf(`%s %s`, grammar.Literal(kv.key+"="), val)
		if required[kv.key] {
			req = append(req, item)
		} else {
			opt = append(opt, item)
		}
	}
	optional := ""
	if len(opt) > 0 {
		optional = fmt.Sprintf("( %s )", strings.Join(opt, " | "))
	}
	switch {
	case len(req) > 0 && optional != "":
		return fmt.Sprintf(`%s ( ", " %s )*`, strings.Join(req, ` ", " `), optional), nil
	case len(req) > 0:
		return strings.Join(req, ` ", " `), nil
	case optional != "":
		return fmt.Sprintf(`( %s ( ", " %s )* )?`, optional, optional), nil
	}
	return `""`, nil
}

type keyValue struct {
	key   string
	value json.RawMessage
}

// orderedKeys reads a JSON object's members in their written order.
func orderedKeys(raw json.RawMessage) ([]keyValue, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("properties is not an object")
	}
	var out []keyValue
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, keyValue{key: tok.(string), value: v})
	}
	return out, nil
}

func isPyIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isIdentChar(s[i]) || i == 0 && s[i] >= '0' && s[i] <= '9' {
			return false
		}
	}
	return s != ""
}

// probePythonic recognises a Python list of calls between markers.
func probePythonic(p probe) (string, callSyntax, bool) {
	i := strings.Index(p.one, "["+probeFnA+"(")
	if i < 0 {
		return "", nil, false
	}
	end := jsonEnd(p.one, i)
	if end < 0 {
		return "", nil, false
	}
	s := &pythonic{open: strings.TrimSpace(p.one[:i]), close: strings.TrimSpace(p.one[end:])}
	if s.open == "" {
		return "", nil, false
	}
	return "pythonic", s, true
}
