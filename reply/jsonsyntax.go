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
// Llama 3.x writes a bare object, the key "parameters" for the arguments.
type taggedJSON struct {
	open, close string
	// atStart: open counts only at the start of the reply.
	atStart bool
	// list: the body is a JSON array of calls (one block for all calls).
	list bool
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
	// A bare JSON opener ({"name") is part of the value itself.
	body := len(t.open)
	if strings.HasPrefix(t.open, "{") || strings.HasPrefix(t.open, "[") {
		body = 0
	}
	end := jsonEnd(buf, body)
	if end == -2 || end == -1 && final {
		return -1
	}
	if end < 0 {
		return -1
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
	if !strings.HasPrefix(t.open, "{") && !strings.HasPrefix(t.open, "[") {
		body = strings.TrimPrefix(body, t.open)
	}
	if t.close != "" {
		body = strings.TrimSuffix(strings.TrimRight(body, " \t\r\n"), t.close)
	}
	body = strings.TrimSpace(body)
	var objs []json.RawMessage
	if strings.HasPrefix(body, "[") {
		if err := json.Unmarshal([]byte(body), &objs); err != nil {
			return nil, fmt.Errorf("the call list is not JSON: %w", err)
		}
		if len(objs) == 0 {
			return nil, fmt.Errorf("the call list is empty")
		}
	} else {
		objs = []json.RawMessage{json.RawMessage(body)}
	}
	out := make([]ToolCall, 0, len(objs))
	for _, o := range objs {
		c, err := jsonCall(o, t.argsKey)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// jsonCall reads {"name": …, argsKey: {…}}. Arguments written as a string
// holding an object are taken too; missing arguments are {}.
func jsonCall(raw json.RawMessage, argsKey string) (ToolCall, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ToolCall{}, fmt.Errorf("the call is not a JSON object: %w", err)
	}
	var c ToolCall
	if err := json.Unmarshal(obj["name"], &c.Name); err != nil || c.Name == "" {
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
	schema, err := callSchema(tools, t.argsKey)
	if err != nil {
		return "", err
	}
	call, rules, err := schemaRules(schema, root+"-call")
	if err != nil {
		return "", err
	}
	open, close := "", ""
	if !strings.HasPrefix(t.open, "{") {
		open = grammar.Literal(t.open) + " "
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
	default:
		body = call
	}
	block := fmt.Sprintf("%s%s%s", open, body, close)
	if parallel && !t.list {
		// One block per call: the rule repeats the block.
		return fmt.Sprintf("%s ::= %s ( \"\\n\" %s )*\n%s", root, block, block, rules), nil
	}
	return fmt.Sprintf("%s ::= %s\n%s", root, block, rules), nil
}

// callSchema is the JSON Schema of one call object to any of tools. It is
// written by hand rather than marshalled from a map, because the grammar
// keeps the schema's property order and the name must come first: a
// client streaming the call learns which tool it is before its arguments.
func callSchema(tools []Tool, argsKey string) (json.RawMessage, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	key, _ := json.Marshal(argsKey)
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
		fmt.Fprintf(&b, `{"type":"object","properties":{"name":{"const":%s},%s:%s},"required":["name",%s],"additionalProperties":false}`,
			name, key, params, key)
	}
	if len(tools) > 1 {
		b.WriteString(`]}`)
	}
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("a tool's parameters are not JSON")
	}
	return b.Bytes(), nil
}
