package reply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"superfluid/grammar"
)

// grammar states the calls as the template writes them, with an optional
// newline wherever the parser takes whitespace between markers: each
// declared parameter in the schema's order (the required ones always),
// a string parameter as raw text, any other as JSON its schema admits.
func (x *xmlParams) grammar(tools []Tool, parallel bool, root string) (string, error) {
	if len(tools) == 0 {
		return "", fmt.Errorf("no tools to call")
	}
	var rules strings.Builder
	var alts []string
	for i, t := range tools {
		name := fmt.Sprintf("%s-t%d", root, i)
		body, err := x.callRule(t, name, &rules)
		if err != nil {
			return "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		fmt.Fprintf(&rules, "%s ::= %s\n", name, body)
		alts = append(alts, name)
	}
	callRule := root + "-call"
	fmt.Fprintf(&rules, "%s ::= %s\n", callRule, strings.Join(alts, " | "))
	nl := `"\n"?`
	var top string
	switch {
	case x.blockOpen == "" || x.perBlock:
		block := callRule
		if x.blockOpen != "" {
			block = fmt.Sprintf("%s %s %s %s %s", grammar.Literal(x.blockOpen), nl, callRule, nl, grammar.Literal(x.blockClose))
		}
		top = block
		if parallel {
			top = fmt.Sprintf("%s ( %s %s )*", block, nl, block)
		}
	default:
		calls := callRule
		if parallel {
			calls = fmt.Sprintf("%s ( %s %s )*", callRule, nl, callRule)
		}
		top = fmt.Sprintf("%s %s %s %s %s", grammar.Literal(x.blockOpen), nl, calls, nl, grammar.Literal(x.blockClose))
	}
	return fmt.Sprintf("%s ::= %s\n%s", root, top, rules.String()), nil
}

// callRule is the body of the rule for one call to t; rules of its
// parameters go to out.
func (x *xmlParams) callRule(t Tool, name string, out *strings.Builder) (string, error) {
	nl := `"\n"?`
	head := grammar.Literal(x.callOpen) + " " + grammar.Literal(t.Name)
	if x.nameEnd != "" {
		head += " " + grammar.Literal(x.nameEnd)
	}
	for _, a := range x.nameAttrs {
		head += fmt.Sprintf(` %s [^"]* "\""`, grammar.Literal(" "+a+`="`))
	}
	if len(x.nameAttrs) > 0 {
		head += " " + grammar.Literal(x.attrEnd)
	}
	props, required, err := orderedProperties(t.Parameters)
	if err != nil {
		return "", err
	}
	types := propertyTypes(t.Parameters)
	parts := []string{head}
	if props == nil {
		// Any object: any keys, each value text.
		p := x.paramRule(`[^<>"]+`, x.textRule(name, out), false)
		parts = append(parts, fmt.Sprintf("( %s %s )*", nl, p))
	}
	for j, p := range props {
		isString := types[p.key] == "string"
		var value string
		if isString {
			value = x.textRule(name, out)
		} else {
			start, rules, err := schemaRules(p.schema, "root")
			if err != nil {
				return "", fmt.Errorf("parameter %q: %w", p.key, err)
			}
			prefix := fmt.Sprintf("%s-p%d-", name, j)
			out.WriteString(grammar.Prefixed(rules, prefix))
			value = prefix + start
			if x.newlines {
				value = `"\n" ` + value + ` "\n"`
			}
		}
		param := x.paramRule(grammar.Literal(p.key), value, isString)
		if required[p.key] {
			parts = append(parts, nl+" "+param)
		} else {
			parts = append(parts, fmt.Sprintf("( %s %s )?", nl, param))
		}
	}
	parts = append(parts, nl, grammar.Literal(x.callClose))
	return strings.Join(parts, " "), nil
}

// paramRule is one parameter: its opener, key, the key's end, the value
// and the value's end.
func (x *xmlParams) paramRule(key, value string, isString bool) string {
	end := ""
	if x.attrs {
		end = grammar.Literal(`"`)
		for _, a := range x.keyAttrs {
			switch {
			case a == "string":
				end += " " + grammar.Literal(fmt.Sprintf(` string="%v"`, isString))
			case a == "type" && isString:
				end += " " + grammar.Literal(` type="string"`)
			default:
				end += fmt.Sprintf(` %s [a-z0-9_]* "\""`, grammar.Literal(" "+a+`="`))
			}
		}
		end += " " + grammar.Literal(x.attrEnd)
	} else {
		lits := make([]string, len(x.keyEnd))
		for i, k := range x.keyEnd {
			lits[i] = grammar.Literal(k)
		}
		end = strings.Join(lits, ` "\n"? `)
	}
	valueEnd := grammar.Literal(x.valueEnd)
	if x.keyed {
		before, after, _ := strings.Cut(x.valueEnd, keyHole)
		valueEnd = fmt.Sprintf("%s %s %s", grammar.Literal(before), key, grammar.Literal(after))
	}
	return fmt.Sprintf("%s %s %s %s %s", grammar.Literal(x.paramOpen), key, end, value, valueEnd)
}

// textRule names the rule of a raw string value: text without "</",
// which would begin the value's end.
func (x *xmlParams) textRule(name string, out *strings.Builder) string {
	rule := name + "-text"
	if !strings.Contains(out.String(), rule+" ::=") {
		body := `( [^<] | "<" [^/] )*`
		if x.newlines {
			body = `"\n" ` + body + ` "\n"`
		}
		fmt.Fprintf(out, "%s ::= %s\n", rule, body)
	}
	return rule
}

type property struct {
	key    string
	schema json.RawMessage
}

// orderedProperties reads a parameters schema's properties in the order
// written, and which are required; nil properties for a schema that
// declares none (any object).
func orderedProperties(schema json.RawMessage) ([]property, map[string]bool, error) {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, nil, nil
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, nil, fmt.Errorf("the parameters schema is not a JSON object: %w", err)
	}
	if len(s.Properties) == 0 {
		return nil, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("properties is not an object")
	}
	var out []property
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, err
		}
		out = append(out, property{key: tok.(string), schema: raw})
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	return out, req, nil
}
