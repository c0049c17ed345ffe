package reply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// xmlParams is the family of syntaxes that write a call as markup with
// one element per parameter, its value as raw text:
//
//	Qwen3-Coder  <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
//	MiniMax M2   <minimax:tool_call>\n<invoke name="NAME">\n<parameter name="KEY">VALUE</parameter>\n</invoke>\n…
//	DeepSeek V3.2 <｜DSML｜function_calls>\n<｜DSML｜invoke name="NAME">\n<｜DSML｜parameter name="KEY" string="true">VALUE</｜DSML｜parameter>…
//	GLM 4.6      <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>
//	MiniCPM5     <function name="NAME"><param name="KEY">VALUE</param></function>
//
// Every marker is read from the template's rendering of the probe calls
// (xml_probe.go). Whitespace between markers is optional when parsing.
type xmlParams struct {
	// blockOpen and blockClose wrap the calls; "" when each call stands
	// alone (GLM, MiniCPM5).
	blockOpen, blockClose string
	// perBlock: the template writes one block per call (Qwen3-Coder)
	// rather than all calls in one (MiniMax).
	perBlock bool
	// callOpen comes before the name, nameEnd after it ("" when the name
	// ends at the first space or marker, as GLM writes it).
	callOpen, nameEnd, callClose string
	// paramOpen comes before the key, keyEnd after it (its parts may be
	// parted by whitespace: GLM's </arg_key>\n<arg_value>), valueEnd after
	// the value.
	paramOpen string
	keyEnd    []string
	valueEnd  string
	// attrs: the key is a quoted attribute followed by others up to
	// attrEnd (">", Kimi K3's "<|sep|>"), one of which says whether the
	// value is a string: DSML's string="true", Kimi K3's type="string".
	attrs    bool
	attrEnd  string
	keyAttrs []string // the attributes after the key: "string", "type"
	// nameAttrs are the attributes the template writes after a quoted
	// name, up to attrEnd (Kimi K3's index="1").
	nameAttrs []string
	// newlines: the template puts the value on lines of its own.
	newlines bool
	// keyed: the value ends with a closing tag named by its key
	// (MiniMax M3's <KEY>VALUE</KEY>); valueEnd holds keyHole where the
	// key goes.
	keyed bool
}

// keyHole stands for the key in a keyed valueEnd.
const keyHole = "\x00"

// valueEndFor is the text that ends the value of key.
func (x *xmlParams) valueEndFor(key string) string {
	return strings.Replace(x.valueEnd, keyHole, key, 1)
}

func (x *xmlParams) first() string {
	if x.blockOpen != "" {
		return x.blockOpen
	}
	return x.callOpen
}

func (x *xmlParams) openers() []opener { return []opener{{text: x.first()}} }

func (x *xmlParams) markers() []string {
	out := []string{x.callOpen, x.callClose, x.paramOpen}
	if !x.keyed {
		out = append(out, x.valueEnd)
	}
	if x.blockOpen != "" {
		out = append(out, x.blockClose)
	}
	if x.nameEnd != "" && strings.HasPrefix(x.nameEnd, "<") {
		out = append(out, x.nameEnd)
	}
	if strings.HasPrefix(x.attrEnd, "<") {
		out = append(out, x.attrEnd)
	}
	for _, k := range x.keyEnd {
		if strings.HasPrefix(k, "<") {
			out = append(out, k)
		}
	}
	return out
}

func (x *xmlParams) closer() string {
	if x.blockOpen != "" {
		return x.blockClose
	}
	return x.callClose
}

func (x *xmlParams) blockEnd(buf string, final bool) int {
	if i := strings.Index(buf, x.closer()); i >= 0 {
		return i + len(x.closer())
	}
	if final {
		// The model stopped without the closer: parse decides whether
		// what it wrote is still whole calls.
		return len(buf)
	}
	return -1
}

func (x *xmlParams) parse(block string) ([]ToolCall, error) { return x.parseTyped(block, nil) }

// parseTyped reads the calls of block; schemas (by tool name) tell which
// values are strings, so that a string parameter whose text is "7" stays
// a string. Without a schema a value that is JSON is read as JSON.
func (x *xmlParams) parseTyped(block string, schemas map[string]json.RawMessage) ([]ToolCall, error) {
	c := &cursor{s: block}
	if x.blockOpen != "" && !c.lit(x.blockOpen) {
		return nil, fmt.Errorf("the block does not open with %q", x.blockOpen)
	}
	if x.blockOpen != "" && strings.HasPrefix(strings.TrimSpace(c.s[c.i:]), "{") {
		return x.jsonInBlock(c)
	}
	var out []ToolCall
	for {
		if x.blockOpen != "" && c.lit(x.blockClose) || c.blank() && len(out) > 0 {
			break
		}
		if rest := strings.TrimSpace(c.s[c.i:]); len(out) > 0 && x.blockOpen != "" && strings.HasPrefix(x.blockClose, rest) {
			// The text stops inside the block's closer (the model
			// ended there, or the probe's difference cut its tail).
			c.i = len(c.s)
			break
		}
		if x.blockOpen == "" && len(out) > 0 {
			return nil, fmt.Errorf("text after the call")
		}
		call, err := x.call(c, schemas)
		if err != nil {
			return nil, err
		}
		out = append(out, call)
	}
	if !c.blank() {
		return nil, fmt.Errorf("text after the calls")
	}
	return out, nil
}

func (x *xmlParams) call(c *cursor, schemas map[string]json.RawMessage) (ToolCall, error) {
	if !c.lit(x.callOpen) {
		return ToolCall{}, fmt.Errorf("expected %q", x.callOpen)
	}
	var name string
	var ok bool
	if x.nameEnd != "" {
		name, ok = c.until(x.nameEnd)
		if ok && len(x.nameAttrs) > 0 {
			_, ok = c.until(x.attrEnd)
		}
	} else {
		name, ok = c.word()
	}
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return ToolCall{}, fmt.Errorf("the call has no name")
	}
	types := propertyTypes(schemas[name])
	var args bytes.Buffer
	args.WriteByte('{')
	seen := map[string]bool{}
	for !c.lit(x.callClose) {
		if !c.lit(x.paramOpen) {
			return ToolCall{}, fmt.Errorf("call %q: expected %q or %q", name, x.paramOpen, x.callClose)
		}
		key, isString, err := x.key(c)
		if err != nil {
			return ToolCall{}, fmt.Errorf("call %q: %w", name, err)
		}
		raw, ok := c.until(x.valueEndFor(key))
		if !ok {
			return ToolCall{}, fmt.Errorf("call %q: parameter %q never ends", name, key)
		}
		if seen[key] {
			return ToolCall{}, fmt.Errorf("call %q: parameter %q given twice", name, key)
		}
		seen[key] = true
		if isString == nil && types[key] == "string" {
			yes := true
			isString = &yes
		}
		if len(seen) > 1 {
			args.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		args.Write(k)
		args.WriteByte(':')
		args.Write(markupValue(trimNewline(raw), isString))
	}
	args.WriteByte('}')
	return ToolCall{Name: name, Arguments: json.RawMessage(args.Bytes())}, nil
}

// key reads a parameter's key and what follows it up to the value; with
// attrs it also reads whether the value is declared a string.
func (x *xmlParams) key(c *cursor) (string, *bool, error) {
	if !x.attrs {
		key, ok := c.until(x.keyEnd[0])
		if !ok {
			return "", nil, fmt.Errorf("a parameter key never ends")
		}
		for _, part := range x.keyEnd[1:] {
			if !c.lit(part) {
				return "", nil, fmt.Errorf("expected %q", part)
			}
		}
		return strings.TrimSpace(key), nil, nil
	}
	key, ok := c.until(`"`)
	if !ok {
		return "", nil, fmt.Errorf("a parameter key never ends")
	}
	rest, ok := c.until(x.attrEnd)
	if !ok {
		return "", nil, fmt.Errorf("parameter %q: its attributes never end", key)
	}
	var isString *bool
	if _, v, found := strings.Cut(rest, `string="`); found {
		yes := strings.HasPrefix(v, `true"`)
		isString = &yes
	} else if _, v, found := strings.Cut(rest, `type="`); found {
		yes := strings.HasPrefix(v, `string"`)
		isString = &yes
	}
	return key, isString, nil
}

// markupValue is a raw value as JSON: a string when it is declared one,
// else the JSON it is, or a string when it is none.
func markupValue(raw string, isString *bool) json.RawMessage {
	if isString == nil || !*isString {
		t := strings.TrimSpace(raw)
		var buf bytes.Buffer
		if t != "" && json.Compact(&buf, []byte(t)) == nil {
			return buf.Bytes()
		}
	}
	s, _ := json.Marshal(raw)
	return s
}

// trimNewline drops the one newline a template puts on each side of a
// value written on lines of its own.
func trimNewline(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "\r"), "\n")
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

// propertyTypes maps each property of a parameters schema to its type
// when it names exactly one ("string", "integer" …).
func propertyTypes(schema json.RawMessage) map[string]string {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := make(map[string]string, len(s.Properties))
	for k, p := range s.Properties {
		var t string
		if json.Unmarshal(p.Type, &t) == nil {
			out[k] = t
		}
	}
	return out
}

// jsonInBlock reads a Hermes call, {"name": …, "arguments": {…}}, in the
// block's markers: Qwen3-Coder and Qwen3.5 write one now and then, the
// syntax of the Qwen models before them.
func (x *xmlParams) jsonInBlock(c *cursor) ([]ToolCall, error) {
	start := skipSpace(c.s, c.i)
	end := jsonEnd(c.s, start)
	if end < 0 {
		return nil, fmt.Errorf("the call is not JSON")
	}
	call, err := jsonCall(json.RawMessage(c.s[start:end]), "name", "arguments")
	if err != nil {
		return nil, err
	}
	c.i = end
	c.lit(x.blockClose) // optional: the model may stop before it
	if !c.blank() {
		return nil, fmt.Errorf("text after the call")
	}
	return []ToolCall{call}, nil
}
