package task

import (
	"encoding/json"
	"fmt"
	"slices"

	"superfluid/chat"
	"superfluid/reply"
	"superfluid/sched"
)

// An assistant turn, whichever API asks for it. Each chat API reads its
// own fields into a Chat — the conversation, the tools, how it may call
// them, whether to think — and PlanChat makes one plan of it: the prompt
// rendered through the template with the tools, the grammar that holds
// calls to their schemas, and the parser that reads the reply back into
// reasoning, content and calls (package reply). FollowTurn then runs the
// plan and hands the API its events; the API only words them.

// Chat is what a chat request asks of the model's next turn.
type Chat struct {
	Messages []chat.Message
	Tools    Tools
	// Kwargs are the template's extra variables (chat_template_kwargs).
	Kwargs map[string]json.RawMessage
	// Think, when set, turns the template's reasoning on or off
	// (enable_thinking), unless Kwargs says so itself.
	Think *bool
	// Effort is reasoning_effort, which gpt-oss's template reads.
	Effort string
	// Continues: a final assistant message is the start of the reply
	// (Anthropic's and Ollama's prefill), continued rather than answered.
	Continues bool
	// Shape is the structured-output constraint, if any.
	Shape Constraint
	// Images are the files the messages' MediaMarkers stand for, in
	// order; ImageField names the request's field for them in refusals.
	Images     [][]byte
	ImageField string
}

// Tools are a request's tools and what it demands of their calls.
type Tools struct {
	List []reply.Tool
	// Defs are the definitions in OpenAI's shape, which templates read.
	Defs []json.RawMessage
	// None: the model must not call (tool_choice "none"); the template is
	// rendered without the tools, as llama-server does.
	None bool
	Req  reply.Requirement
	// Field names the request's tools field in errors.
	Field string
}

// Active reports whether the model may call the tools.
func (t Tools) Active() bool { return len(t.List) > 0 && !t.None }

// NewTools checks a request's tools: each needs a unique name that a
// template and a grammar can carry, and a parameters schema that is an
// object schema (or absent).
func NewTools(field string, list []reply.Tool) (Tools, error) {
	t := Tools{List: list, Field: field}
	seen := map[string]bool{}
	for i, tool := range list {
		if !ValidToolName(tool.Name) {
			return t, BadParam(field, "%s[%d]: a tool name must be 1-128 letters, digits, '_', '-' or '.'", field, i)
		}
		if seen[tool.Name] {
			return t, BadParam(field, "%s[%d]: the name %q is declared twice", field, i, tool.Name)
		}
		seen[tool.Name] = true
		if !IsNull(tool.Parameters) {
			if _, err := SchemaValue(field, tool.Parameters); err != nil {
				return t, BadParam(field, "%s[%d].parameters: a JSON Schema must be an object or a boolean", field, i)
			}
		} else {
			list[i].Parameters = nil
		}
		def, err := json.Marshal(templateToolDef{Type: "function", Function: templateFunctionDef{
			Name: tool.Name, Description: tool.Description, Parameters: schemaOrEmpty(list[i].Parameters)}})
		if err != nil {
			return t, BadParam(field, "%s[%d]: %v", field, i, err)
		}
		t.Defs = append(t.Defs, def)
	}
	return t, nil
}

// Require sets what the request demands: mode "auto", "none", "required"
// (OpenAI; Anthropic's "any"), or "named" with a tool's name.
func (t *Tools) Require(field, mode, name string, single bool) error {
	t.Req.Single = single
	switch mode {
	case "", "auto":
	case "none":
		t.None = true
	case "required":
		t.Req.Required = true
	case "named":
		if !slices.ContainsFunc(t.List, func(x reply.Tool) bool { return x.Name == name }) {
			return BadParam(field, "%s names %q, which is not among the tools", field, name)
		}
		t.Req.Required, t.Req.Only = true, name
	default:
		return BadParam(field, "%s: unknown mode %q", field, mode)
	}
	if t.Req.Required && len(t.List) == 0 {
		return BadParam(field, "%s requires a call, but the request declares no tools", field)
	}
	return nil
}

// ValidToolName reports a name a template and a grammar can carry.
func ValidToolName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func schemaOrEmpty(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return raw
}

// templateToolDef is a tool as OpenAI's chat API defines one; every API's
// tools reach the template in this shape, the one templates are written
// for.
type templateToolDef struct {
	Type     string              `json:"type"`
	Function templateFunctionDef `json:"function"`
}

type templateFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// SetEffort reads a reasoning effort (OpenAI's reasoning_effort,
// Responses' reasoning.effort): it reaches the template as
// reasoning_effort, and "none" turns thinking off for templates that
// read enable_thinking instead.
func (c *Chat) SetEffort(field, effort string) error {
	switch effort {
	case "none":
		off := false
		c.Think = &off
	case "minimal", "low", "medium", "high", "xhigh":
	default:
		return BadParam(field, "%s must be one of none, minimal, low, medium, high or xhigh", field)
	}
	c.Effort = effort
	return nil
}

// TemplateKwargs are the template variables a turn sets: the request's
// own, then enable_thinking and reasoning_effort where the request asked
// and its kwargs did not say.
func (c *Chat) TemplateKwargs() map[string]json.RawMessage {
	kw := make(map[string]json.RawMessage, len(c.Kwargs)+2)
	for k, v := range c.Kwargs {
		kw[k] = v
	}
	if _, ok := kw["enable_thinking"]; !ok && c.Think != nil {
		kw["enable_thinking"] = json.RawMessage(fmt.Sprint(*c.Think))
	}
	if _, ok := kw["reasoning_effort"]; !ok && c.Effort != "" {
		b, _ := json.Marshal(c.Effort)
		kw["reasoning_effort"] = b
	}
	return kw
}

// ChatClass is the class a chat turn runs in when the client named none
// (headerSent false): a turn that declares tools is an agent's (a person
// waits on the whole tool loop, not on each token); any other turn, or
// a class the client named, is fallback's.
func ChatClass(c *Chat, headerSent bool, fallback func() (sched.Class, error)) (sched.Class, error) {
	if !headerSent && c.Tools.Active() {
		return sched.Agent, nil
	}
	return fallback()
}
