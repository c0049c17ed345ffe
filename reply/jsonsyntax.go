package reply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"superfluid/grammar"
)

// taggedJSON is the commonest call syntax: an opening marker, the call as a
// JSON object {"name": …, "arguments": {…}} (or a list of them), and an
// optional closing marker. Hermes and Qwen2.5 write
// <tool_call>{…}</tool_call> per call; Mistral writes [TOOL_CALLS][{…}, …];
// Llama 3.x writes a bare object, the key "parameters" for the arguments;
// Command R writes "tool_name"; Apertus writes {"name": {arguments}}.
type taggedJSON struct {
	open, close string
	// atStart: open counts only at the start of the reply.
	atStart bool
	// list: the body is a JSON array of calls (one block for all calls).
	list bool
	// multi: the body is one or more objects, whitespace between them
	// (MiniMax-M1's one call a line).
	multi bool
	// nameKey is the key of the tool's name ("name", "tool_name"); ""
	// when the name is the object's only key and the arguments its value.
	nameKey string
	// argsKey is the key of the arguments ("arguments", "parameters").
	argsKey string
}

func (t *taggedJSON) openers() []opener { return []opener{{text: t.open, atStart: t.atStart}} }

func (t *taggedJSON) markers() []string {
	if t.close == "" {
		return nil
	}
	return []string{t.close}
}

func (t *taggedJSON) blockEnd(buf string, final bool) int {
	// A bare JSON opener ({"name"), which counts only at the start, is
	// part of the value itself.
	body := len(t.open)
	if t.atStart {
		body = 0
	}
	end := jsonEnd(buf, body)
	if end == -2 {
		// Not JSON after the opener: a block that cannot parse, released
		// now rather than held to the end of the reply.
		return skipSpace(buf, body)
	}
	if end < 0 {
		return -1
	}
	for t.multi {
		next := skipSpace(buf, end)
		if next == len(buf) && !final {
			return -1
		}
		if next == len(buf) || buf[next] != '{' {
			break
		}
		e := jsonEnd(buf, next)
		if e < 0 {
			if final {
				break
			}
			return -1
		}
		end = e
	}
	if t.close == "" {
		return end
	}
	after := skipSpace(buf, end)
	full, partial := hasPrefixOrIsPrefix(buf[after:], t.close)
	switch {
	case full:
		return after + len(t.close)
	case partial && !final:
		return -1
	}
	// The model went on without the closer: the call still stands.
	return end
}

func (t *taggedJSON) parse(block string) ([]ToolCall, error) {
	body := block
	if !t.atStart {
		body = strings.TrimPrefix(body, t.open)
	}
	if t.close != "" {
		body = strings.TrimSuffix(strings.TrimRight(body, " \t\r\n"), t.close)
	}
	body = strings.TrimSpace(body)
	if !t.multi && !json.Valid([]byte(body)) {
		// Models trained on templates that print a dict (Hermes 2 Pro's
		// era) sometimes write the call as one.
		if v, err := pyLiteral(body); err == nil {
			body = string(v)
		}
	}
	var objs []json.RawMessage
	switch {
	case t.multi:
		dec := json.NewDecoder(strings.NewReader(body))
		for dec.More() {
			var o json.RawMessage
			if err := dec.Decode(&o); err != nil {
				return nil, fmt.Errorf("a call is not JSON: %w", err)
			}
			objs = append(objs, o)
		}
		if len(objs) == 0 {
			return nil, fmt.Errorf("the call block is empty")
		}
	case strings.HasPrefix(body, "["):
		if err := json.Unmarshal([]byte(body), &objs); err != nil {
			return nil, fmt.Errorf("the call list is not JSON: %w", err)
		}
		if len(objs) == 0 {
			return nil, fmt.Errorf("the call list is empty")
		}
	default:
		objs = []json.RawMessage{json.RawMessage(body)}
	}
	out := make([]ToolCall, 0, len(objs))
	for _, o := range objs {
		c, err := jsonCall(o, t.nameKey, t.argsKey)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// jsonCall reads {nameKey: …, argsKey: {…}}, or {name: {…}} when nameKey
// is "". Arguments written as a string holding an object are taken too;
// missing arguments are {}.
func jsonCall(raw json.RawMessage, nameKey, argsKey string) (ToolCall, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ToolCall{}, fmt.Errorf("the call is not a JSON object: %w", err)
	}
	var c ToolCall
	if nameKey == "" {
		if len(obj) != 1 {
			return ToolCall{}, fmt.Errorf("the call has %d keys, not one", len(obj))
		}
		for name, args := range obj {
			c.Name = name
			a, err := argumentsObject(args)
			if err != nil {
				return ToolCall{}, fmt.Errorf("call %q: %w", c.Name, err)
			}
			c.Arguments = a
		}
		return c, nil
	}
	if err := json.Unmarshal(obj[nameKey], &c.Name); err != nil || c.Name == "" {
		return ToolCall{}, fmt.Errorf("the call has no name")
	}
	if id, ok := obj["id"]; ok {
		_ = json.Unmarshal(id, &c.ID)
	}
	args, err := argumentsObject(obj[argsKey])
	if err != nil {
		return ToolCall{}, fmt.Errorf("call %q: %w", c.Name, err)
	}
	c.Arguments = args
	return c, nil
}

// argumentsObject returns raw as a compact JSON object: raw is an object, a
// string holding one, or absent ({}).
func argumentsObject(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("arguments are not a JSON string")
		}
		raw = bytes.TrimSpace([]byte(s))
	}
	var buf bytes.Buffer
	if len(raw) == 0 || raw[0] != '{' || json.Compact(&buf, raw) != nil {
		return nil, fmt.Errorf("arguments are not a JSON object")
	}
	return json.RawMessage(buf.Bytes()), nil
}

func (t *taggedJSON) grammar(tools []Tool, parallel bool, root string) (string, error) {
	schema, err := callSchema(tools, t.nameKey, t.argsKey)
	if err != nil {
		return "", err
	}
	call, rules, err := schemaRules(schema, root+"-call")
	if err != nil {
		return "", err
	}
	open, close := "", ""
	if !t.atStart {
		open = grammar.Literal(t.open) + ` "\n"? `
	}
	if t.close != "" {
		close = ` "\n"? ` + grammar.Literal(t.close)
	}
	var body string
	switch {
	case t.list && parallel:
		body = fmt.Sprintf(`"[" %s ( ", " %s )* "]"`, call, call)
	case t.list:
		body = fmt.Sprintf(`"[" %s "]"`, call)
	case t.multi && parallel:
		body = fmt.Sprintf(`%s ( "\n" %s )*`, call, call)
	default:
		body = call
	}
	block := fmt.Sprintf("%s%s%s", open, body, close)
	if parallel && !t.list && !t.multi {
		// One block per call: the rule repeats the block.
		return fmt.Sprintf("%s ::= %s ( \"\\n\" %s )*\n%s", root, block, block, rules), nil
	}
	return fmt.Sprintf("%s ::= %s\n%s", root, block, rules), nil
}

// callSchema is the JSON Schema of one call object to any of tools. It is
// written by hand rather than marshalled from a map, because the grammar
// keeps the schema's property order and the name must come first: a
// client streaming the call learns which tool it is before its arguments.
func callSchema(tools []Tool, nameKey, argsKey string) (json.RawMessage, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	key, _ := json.Marshal(argsKey)
	nkey, _ := json.Marshal(nameKey)
	var b bytes.Buffer
	if len(tools) > 1 {
		b.WriteString(`{"anyOf":[`)
	}
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		params := bytes.TrimSpace(t.Parameters)
		if len(params) == 0 {
			params = []byte(`{"type":"object"}`)
		}
		name, _ := json.Marshal(t.Name)
		if nameKey == "" {
			fmt.Fprintf(&b, `{"type":"object","properties":{%s:%s},"required":[%s],"additionalProperties":false}`,
				name, params, name)
			continue
		}
		fmt.Fprintf(&b, `{"type":"object","properties":{%s:{"const":%s},%s:%s},"required":[%s,%s],"additionalProperties":false}`,
			nkey, name, key, params, nkey, key)
	}
	if len(tools) > 1 {
		b.WriteString(`]}`)
	}
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("a tool's parameters are not JSON")
	}
	return b.Bytes(), nil
}
