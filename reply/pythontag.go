package reply

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"superfluid/chat"
	"superfluid/grammar"
)

// pythonTagged adds Llama 3.1's builtin-tool calls to the template's own
// call syntax: <|python_tag|>brave_search.call(query="…"), which the
// template writes for a tool named in builtin_tools, and which the model
// also uses, under its "Environment: ipython" system line, for a call as
// JSON or for code to run.
type pythonTagged struct {
	callSyntax
	tag string // <|python_tag|>
	end string // <|eom_id|>, which ends the turn; "" when not known
}

func (p *pythonTagged) openers() []opener {
	return append(append([]opener(nil), p.callSyntax.openers()...), opener{text: p.tag})
}

func (p *pythonTagged) markers() []string {
	out := p.callSyntax.markers()
	if p.end != "" {
		out = append(out, p.end)
	}
	return out
}

func (p *pythonTagged) blockEnd(buf string, final bool) int {
	if !strings.HasPrefix(buf, p.tag) {
		return p.callSyntax.blockEnd(buf, final)
	}
	// The tagged text runs to the end of the turn: code has no end of its
	// own, so only the turn's end (or of generation) closes it.
	if p.end != "" {
		if i := strings.Index(buf, p.end); i >= 0 {
			return i + len(p.end)
		}
	}
	if final {
		return len(buf)
	}
	return -1
}

// grammar allows the template's own calls, bare or after the tag: under
// tool_choice "auto" the tag is one of the lazy grammar's triggers, and a
// call that begins with it must still reach a valid call.
func (p *pythonTagged) grammar(tools []Tool, parallel bool, root string) (string, error) {
	inner, err := p.callSyntax.grammar(tools, parallel, root+"-own")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s ::= ( %s )? %s-own\n%s", root, grammar.Literal(p.tag), root, inner), nil
}

// builtinCall is name.call(arguments).
var builtinCall = regexp.MustCompile(`(?s)^([A-Za-z_][A-Za-z0-9_]*)\.call\((.*)\)$`)

func (p *pythonTagged) parse(block string) ([]ToolCall, error) {
	body, ok := strings.CutPrefix(block, p.tag)
	if !ok {
		return p.callSyntax.parse(block)
	}
	if p.end != "" {
		body = strings.TrimSuffix(strings.TrimSpace(body), p.end)
	}
	body = strings.TrimSpace(body)
	switch m := builtinCall.FindStringSubmatch(body); {
	case strings.HasPrefix(body, "{"):
		c, err := jsonCall(json.RawMessage(body), "name", "parameters")
		if err != nil {
			c, err = jsonCall(json.RawMessage(body), "name", "arguments")
		}
		if err != nil {
			return nil, err
		}
		return []ToolCall{c}, nil
	case m != nil:
		args, err := pyKwargs(m[2])
		if err != nil {
			return nil, fmt.Errorf("builtin call %q: %w", m[1], err)
		}
		return []ToolCall{{Name: m[1], Arguments: args}}, nil
	case body != "":
		// Code for the ipython environment: a call of the code
		// interpreter, taken when the request declares a tool "python".
		code, _ := json.Marshal(map[string]string{"code": body})
		return []ToolCall{{Name: "python", Arguments: code}}, nil
	}
	return nil, fmt.Errorf("nothing follows %s", p.tag)
}

// withBuiltins finds whether the template writes builtin-tool calls (it
// does when the calls' tools are named in the builtin_tools variable) and
// adds them to f's syntax.
func withBuiltins(f Format, t *chat.Template) Format {
	builtins, _ := json.Marshal([]string{probeFnA, probeFnB})
	user := chat.Message{Role: chat.RoleUser, Content: probeQuestion}
	render := func(calls ...chat.ToolCall) (string, error) {
		return t.Exact(chat.Request{
			Messages: []chat.Message{user, {Role: chat.RoleAssistant, NoContent: true, ToolCalls: calls}},
			Tools:    probeTools,
			Kwargs:   map[string]json.RawMessage{"builtin_tools": builtins},
		})
	}
	base, err := render()
	if err != nil {
		return f
	}
	one, err := render(chat.ToolCall{ID: probeIDA, Name: probeFnA, Arguments: probeArgsA})
	if err != nil {
		return f
	}
	text := callText(one, []string{base}, []string{base})
	i := strings.Index(text, probeFnA+".call(")
	if i <= 0 {
		return f
	}
	tag := strings.TrimSpace(text[:i])
	j := strings.LastIndex(text, ")")
	if tag == "" || strings.ContainsAny(tag, " \n") || j < i {
		return f
	}
	pt := &pythonTagged{callSyntax: f.calls, tag: tag, end: strings.TrimSpace(text[j+1:])}
	if calls, err := pt.parse(text); err != nil || len(calls) != 1 || calls[0].Name != probeFnA || !sameJSON(calls[0].Arguments, probeArgsA) {
		return f
	}
	f.calls = pt
	return f
}
