package task

import (
	"encoding/json"
	"slices"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/reply"
)

// ChatPlan is a Chat made ready to submit.
type ChatPlan struct {
	Prompt  []engine.Token
	Grammar *engine.GrammarSpec
	// GrammarField is the request field the grammar came from.
	GrammarField string
	Reply        ReplyPlan
	// Show are the tokens rendered as text although special: the
	// format's markers (llama.cpp's preserved tokens).
	Show []engine.Token
	// Media is the prompt's images, when it has any: the plan holds a
	// reference (Close drops it once the plan's requests are submitted).
	Media *MediaPrompt
}

// Close drops the plan's reference to its images.
func (p *ChatPlan) Close() {
	if p != nil {
		p.Media.Close()
	}
}

// PlanChat renders c and plans how its reply is constrained and read.
func PlanChat(m *Model, c *Chat) (plan *ChatPlan, err error) {
	f := m.Reply()
	p := &ChatPlan{Reply: ReplyPlan{Format: f.Format}, Show: f.Show}
	tools := c.Tools.Active() && f.Format.HasCalls()
	if c.Tools.Active() && !f.Format.HasCalls() {
		return nil, BadParam(c.Tools.Field, "%s: the model's chat template has no way to write tool calls", c.Tools.Field)
	}
	req := chat.Request{Messages: c.Messages, AddGenerationPrompt: true, Kwargs: c.TemplateKwargs()}
	if tools {
		if f.Format.Generic {
			req.Messages = WithSystemText(req.Messages, f.Format.SystemPrompt(c.Tools.List))
		} else {
			req.Tools = c.Tools.Defs
		}
	}
	text, err := RenderTurn(m, req, c.Continues)
	if err != nil {
		return nil, err
	}
	if len(c.Images) > 0 {
		if p.Media, err = NewMediaPrompt(m, c.ImageField, text, c.Images, true); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				p.Media.Close()
			}
		}()
		p.Prompt = p.Media.Prompt
	} else if p.Prompt, err = Tokenize(m, text, true); err != nil {
		return nil, err
	}
	if err := CheckPrompt(m.Desc, p.Prompt); err != nil {
		return nil, err
	}
	opts := &p.Reply.Options
	opts.InReasoning = f.Format.OpensReasoning(text)
	opts.Lead = f.Format.PromptLead(text)
	if tools {
		for _, tool := range c.Tools.List {
			opts.Tools = append(opts.Tools, tool.Name)
		}
		opts.Schemas = toolSchemas(c.Tools.List)
	}
	if err := p.constrain(m, c, tools, text); err != nil {
		return nil, err
	}
	return p, nil
}

// Apply sets on s what the plan decided: the prompt, the grammar and the
// field it came from, how the reply is read and the markers shown.
func (p *ChatPlan) Apply(s *Spec) {
	reply := p.Reply
	s.Prompt, s.Grammar, s.GrammarField = p.Prompt, p.Grammar, p.GrammarField
	s.Reply, s.Show = &reply, p.Show
	s.Media = p.Media
}

// constrain sets the plan's grammar: the calls' grammar when the request
// has tools (lazy, from a call's opener on, unless a call is required),
// else the structured-output constraint. Both at once would need a
// grammar of either, which is not built: refused by name.
func (p *ChatPlan) constrain(m *Model, c *Chat, tools bool, text string) error {
	if !tools {
		g, err := GrammarFor(m, c.Shape, p.Prompt, true)
		p.Grammar, p.GrammarField = g, c.Shape.Field
		return err
	}
	if !c.Shape.None() {
		return Unsupported(c.Shape.Field, "structured output together with tools is not supported; constrain the answer through a tool's parameters")
	}
	req := c.Tools.Req
	req.Lead = p.Reply.Options.Lead
	format := p.Reply.Format
	g, err := format.Grammar(c.Tools.List, req)
	if err != nil {
		return GrammarError(c.Tools.Field, err)
	}
	if g.GBNF == "" {
		// The syntax cannot be triggered safely mid-reply; calls are
		// read, not constrained.
		return nil
	}
	spec := &engine.GrammarSpec{GBNF: g.GBNF, Lazy: g.Lazy}
	for _, trig := range g.Triggers {
		spec.TriggerPatterns = append(spec.TriggerPatterns, RegexpQuote(trig))
	}
	if !g.Lazy && format.HasReasoning() && !format.ClosesReasoning(text) {
		AfterReasoning(spec, reasoningMarkerOf(m, format.ReasoningEnd()))
	}
	p.Grammar, p.GrammarField = spec, c.Tools.Field
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

// WithSystemText appends text to the conversation's system message, or
// starts the conversation with one.
func WithSystemText(msgs []chat.Message, text string) []chat.Message {
	out := slices.Clone(msgs)
	if len(out) > 0 && out[0].Role == chat.RoleSystem {
		out[0].Content += "\n\n" + text
		return out
	}
	return append([]chat.Message{{Role: chat.RoleSystem, Content: text}}, out...)
}

// RenderTurn renders r for the assistant's next turn. When continues and
// the conversation ends with an assistant message carrying no calls, that
// message is the start of the reply: the rest is rendered with the
// generation prompt and the partial reply appended.
func RenderTurn(m *Model, r chat.Request, continues bool) (string, error) {
	last := len(r.Messages) - 1
	if !continues || last < 1 || r.Messages[last].Role != chat.RoleAssistant || len(r.Messages[last].ToolCalls) > 0 {
		return ChatPrompt(m, r)
	}
	partial := r.Messages[last].Content
	r.Messages = r.Messages[:last]
	text, err := ChatPrompt(m, r)
	return text + partial, err
}

// reasoningMarkerOf is the end marker as the grammar's trigger takes it:
// a token when the vocabulary has it as one.
func reasoningMarkerOf(m *Model, text string) ReasoningMarker {
	end := ReasoningMarker{Text: text}
	if toks, err := m.Text.Tokenize(text, false, true); err == nil && len(toks) == 1 {
		end.Token, end.Single = toks[0], true
	}
	return end
}
