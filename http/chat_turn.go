package http

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
)

// An assistant turn, whichever API asks for it. Each chat API reads its
// own fields into a chatTurn — the conversation, the tools, how it may
// call them, whether to think — and planTurn makes one plan of it: the
// prompt rendered through the template with the tools, the grammar that
// holds calls to their schemas, and the parser that reads the reply back
// into reasoning, content and calls (package reply). followTurn then runs
// the plan and hands the API its events; the API only words them.

// chatTurn is what a chat request asks of the model's next turn.
type chatTurn struct {
	msgs  []chat.Message
	tools turnTools
	// kwargs are the template's extra variables (chat_template_kwargs).
	kwargs map[string]json.RawMessage
	// think, when set, turns the template's reasoning on or off
	// (enable_thinking), unless kwargs says so itself.
	think *bool
	// effort is reasoning_effort, which gpt-oss's template reads.
	effort string
	// continues: a final assistant message is the start of the reply
	// (Anthropic's and Ollama's prefill), continued rather than answered.
	continues bool
	// shape is the structured-output constraint, if any.
	shape constraint
}

// turnTools are a request's tools and what it demands of their calls.
type turnTools struct {
	list []reply.Tool
	// defs are the definitions in OpenAI's shape, which templates read.
	defs []json.RawMessage
	// none: the model must not call (tool_choice "none"); the template is
	// rendered without the tools, as llama-server does.
	none bool
	req  reply.Requirement
	// field names the request's tools field in errors.
	field string
}

func (t turnTools) active() bool { return len(t.list) > 0 && !t.none }

// newTurnTools checks a request's tools: each needs a unique name that a
// template and a grammar can carry, and a parameters schema that is an
// object schema (or absent).
func newTurnTools(field string, list []reply.Tool) (turnTools, error) {
	t := turnTools{list: list, field: field}
	seen := map[string]bool{}
	for i, tool := range list {
		if !validToolName(tool.Name) {
			return t, badParam(field, "%s[%d]: a tool name must be 1-128 letters, digits, '_', '-' or '.'", field, i)
		}
		if seen[tool.Name] {
			return t, badParam(field, "%s[%d]: the name %q is declared twice", field, i, tool.Name)
		}
		seen[tool.Name] = true
		if !isNull(tool.Parameters) {
			if _, err := schemaValue(field, tool.Parameters); err != nil {
				return t, badParam(field, "%s[%d].parameters: a JSON Schema must be an object or a boolean", field, i)
			}
		} else {
			list[i].Parameters = nil
		}
		def, err := json.Marshal(oaiToolDef{Type: "function", Function: oaiFunctionDef{
			Name: tool.Name, Description: tool.Description, Parameters: schemaOrEmpty(list[i].Parameters)}})
		if err != nil {
			return t, badParam(field, "%s[%d]: %v", field, i, err)
		}
		t.defs = append(t.defs, def)
	}
	return t, nil
}

// require sets what the request demands: mode "auto", "none", "required"
// (OpenAI; Anthropic's "any"), or a tool's name.
func (t *turnTools) require(field, mode, name string, single bool) error {
	t.req.Single = single
	switch mode {
	case "", "auto":
	case "none":
		t.none = true
	case "required":
		t.req.Required = true
	case "named":
		if !slices.ContainsFunc(t.list, func(x reply.Tool) bool { return x.Name == name }) {
			return badParam(field, "%s names %q, which is not among the tools", field, name)
		}
		t.req.Required, t.req.Only = true, name
	default:
		return badParam(field, "%s: unknown mode %q", field, mode)
	}
	if t.req.Required && len(t.list) == 0 {
		return badParam(field, "%s requires a call, but the request declares no tools", field)
	}
	return nil
}

func validToolName(s string) bool {
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

// oaiToolDef is a tool as OpenAI's chat API defines one; every API's tools
// reach the template in this shape, the one templates are written for.
type oaiToolDef struct {
	Type     string         `json:"type"`
	Function oaiFunctionDef `json:"function"`
}

type oaiFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// turnPlan is a chatTurn made ready to submit.
type turnPlan struct {
	prompt  []engine.Token
	grammar *engine.GrammarSpec
	field   string // the request field the grammar came from
	format  reply.Format
	opts    reply.Options
	// show are the tokens rendered as text although special: the
	// format's markers (llama.cpp's preserved tokens).
	show []engine.Token
}

// planTurn renders t and plans how its reply is constrained and read.
func planTurn(m *Model, t chatTurn) (*turnPlan, error) {
	f := m.Reply()
	p := &turnPlan{format: f.Format, show: f.Show}
	tools := t.tools.active() && f.Format.HasCalls()
	if t.tools.active() && !f.Format.HasCalls() {
		return nil, badParam(t.tools.field, "%s: the model's chat template has no way to write tool calls", t.tools.field)
	}
	req := chat.Request{Messages: t.msgs, AddGenerationPrompt: true, Kwargs: turnKwargs(t)}
	if tools {
		if f.Format.Generic {
			req.Messages = withSystemText(req.Messages, f.Format.SystemPrompt(t.tools.list))
		} else {
			req.Tools = t.tools.defs
		}
	}
	text, err := renderTurn(m, req, t.continues)
	if err != nil {
		return nil, err
	}
	if p.prompt, err = tokenize(m, text, true); err != nil {
		return nil, err
	}
	if err := checkPrompt(m, p.prompt); err != nil {
		return nil, err
	}
	p.opts.InReasoning = f.Format.OpensReasoning(text)
	p.opts.Lead = f.Format.PromptLead(text)
	if tools {
		for _, tool := range t.tools.list {
			p.opts.Tools = append(p.opts.Tools, tool.Name)
		}
		p.opts.Schemas = toolSchemas(t.tools.list)
	}
	if err := p.constrain(m, t, tools, text); err != nil {
		return nil, err
	}
	return p, nil
}

// constrain sets the plan's grammar: the calls' grammar when the request
// has tools (lazy, from a call's opener on, unless a call is required),
// else the structured-output constraint. Both at once would need a
// grammar of either, which is not built: refused by name.
func (p *turnPlan) constrain(m *Model, t chatTurn, tools bool, text string) error {
	if !tools {
		g, err := grammarFor(m, t.shape, p.prompt, true)
		p.grammar, p.field = g, t.shape.field
		return err
	}
	if !t.shape.none() {
		return notSupported(t.shape.field, "structured output together with tools is not supported; constrain the answer through a tool's parameters")
	}
	req := t.tools.req
	req.Lead = p.opts.Lead
	c, err := p.format.Grammar(t.tools.list, req)
	if err != nil {
		return apiErr(task.GrammarError(t.tools.field, err))
	}
	if c.GBNF == "" {
		// The syntax cannot be triggered safely mid-reply; calls are
		// read, not constrained.
		return nil
	}
	spec := &engine.GrammarSpec{GBNF: c.GBNF, Lazy: c.Lazy}
	for _, trig := range c.Triggers {
		spec.TriggerPatterns = append(spec.TriggerPatterns, regexpQuote(trig))
	}
	if !c.Lazy && p.format.HasReasoning() && !p.format.ClosesReasoning(text) {
		afterReasoning(spec, reasoningMarkerOf(m, p.format.ReasoningEnd()))
	}
	p.grammar, p.field = spec, t.tools.field
	return nil
}

// toolSchemas maps each tool's name to its parameters schema, for the
// syntaxes that write arguments as markup and need the schema to read a
// value back as a string or as JSON.
func toolSchemas(list []reply.Tool) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(list))
	for _, t := range list {
		out[t.Name] = t.Parameters
	}
	return out
}

// turnKwargs are the template variables a turn sets: the request's own,
// then enable_thinking and reasoning_effort where the request asked and
// its kwargs did not say.
func turnKwargs(t chatTurn) map[string]json.RawMessage {
	kw := make(map[string]json.RawMessage, len(t.kwargs)+2)
	for k, v := range t.kwargs {
		kw[k] = v
	}
	if _, ok := kw["enable_thinking"]; !ok && t.think != nil {
		kw["enable_thinking"] = json.RawMessage(fmt.Sprint(*t.think))
	}
	if _, ok := kw["reasoning_effort"]; !ok && t.effort != "" {
		b, _ := json.Marshal(t.effort)
		kw["reasoning_effort"] = b
	}
	return kw
}

// withSystemText appends text to the conversation's system message, or
// starts the conversation with one.
func withSystemText(msgs []chat.Message, text string) []chat.Message {
	out := slices.Clone(msgs)
	if len(out) > 0 && out[0].Role == chat.RoleSystem {
		out[0].Content += "\n\n" + text
		return out
	}
	return append([]chat.Message{{Role: chat.RoleSystem, Content: text}}, out...)
}

// renderTurn renders r for the assistant's next turn. When continues and
// the conversation ends with an assistant message carrying no calls, that
// message is the start of the reply: the rest is rendered with the
// generation prompt and the partial reply appended.
func renderTurn(m *Model, r chat.Request, continues bool) (string, error) {
	last := len(r.Messages) - 1
	if !continues || last < 1 || r.Messages[last].Role != chat.RoleAssistant || len(r.Messages[last].ToolCalls) > 0 {
		return chatPrompt(m, r)
	}
	partial := r.Messages[last].Content
	r.Messages = r.Messages[:last]
	text, err := chatPrompt(m, r)
	return text + partial, err
}

// reasoningMarkerOf is the end marker as the grammar's trigger takes it:
// a token when the vocabulary has it as one.
func reasoningMarkerOf(m *Model, text string) reasoningMarker {
	end := reasoningMarker{text: text}
	if toks, err := m.Text.Tokenize(text, false, true); err == nil && len(toks) == 1 {
		end.token, end.single = toks[0], true
	}
	return end
}

// setEffort reads a reasoning effort (OpenAI's reasoning_effort,
// Responses' reasoning.effort): it reaches the template as
// reasoning_effort, and "none" turns thinking off for templates that
// read enable_thinking instead.
func (t *chatTurn) setEffort(field, effort string) error {
	switch effort {
	case "none":
		off := false
		t.think = &off
	case "minimal", "low", "medium", "high", "xhigh":
	default:
		return badParam(field, "%s must be one of none, minimal, low, medium, high or xhigh", field)
	}
	t.effort = effort
	return nil
}

// turnClass is the class a chat turn runs in: the X-Superfluid-Class
// header when sent; else a turn that declares tools is an agent's (a
// person waits on the whole tool loop, not on each token), and any other
// the server's default.
func (s *Server) turnClass(ctx *fasthttp.RequestCtx, t chatTurn) (sched.Class, error) {
	if !wire.ClassSent(ctx) && t.tools.active() {
		return sched.Agent, nil
	}
	return s.requestClass(ctx, "")
}
