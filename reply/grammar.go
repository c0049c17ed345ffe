package reply

import (
	"fmt"
	"strings"

	"superfluid/grammar"
)

// Requirement is what a request demands of the calls.
type Requirement struct {
	// Required: the reply is calls and nothing else (tool_choice
	// "required", Anthropic's "any", or a named tool).
	Required bool
	// Tools limits the calls to these (a named tool_choice); nil: all.
	Only string
	// Single: at most one call (parallel_tool_calls false).
	Single bool
	// Lead is the text the prompt ended with that the reply continues
	// (Format.PromptLead): a required call starts after it.
	Lead string
}

// leadGrammar is a syntax whose grammar can start after a lead the
// generation prompt wrote.
type leadGrammar interface {
	grammarAfter(lead string, tools []Tool, parallel bool, root string) (string, error)
}

// Constraint is a grammar over the reply, as engine.GrammarSpec takes it.
type Constraint struct {
	GBNF string
	// Lazy: the reply is free until one of Triggers appears; the grammar
	// holds from the trigger on (tool_choice "auto").
	Lazy     bool
	Triggers []string // literal texts
}

// Grammar returns the constraint (no GBNF: none) that makes the model's calls valid: under
// req.Required every reply is calls to tools with arguments that satisfy
// each tool's parameters schema; otherwise the model may answer in prose,
// and a call, once its opener appears, is held to the same grammar.
func (f Format) Grammar(tools []Tool, req Requirement) (Constraint, error) {
	if f.calls == nil {
		return Constraint{}, fmt.Errorf("reply: format %q has no call syntax", f.Name)
	}
	if req.Only != "" {
		var only []Tool
		for _, t := range tools {
			if t.Name == req.Only {
				only = append(only, t)
			}
		}
		if len(only) == 0 {
			return Constraint{}, fmt.Errorf("reply: no tool is named %q", req.Only)
		}
		tools = only
	}
	parallel := !req.Single && !f.oneCall
	rules, err := f.calls.grammar(tools, parallel, "sf-calls")
	if lg, ok := f.calls.(leadGrammar); ok && req.Required && req.Lead != "" {
		rules, err = lg.grammarAfter(req.Lead, tools, parallel, "sf-calls")
	}
	if err != nil {
		return Constraint{}, err
	}
	c := Constraint{GBNF: "root ::= sf-calls\n" + rules}
	if !req.Required {
		// An opener that counts only at the start of the reply (Llama's
		// bare {"name", harmony's to=) would trigger anywhere in prose,
		// and hold an answer to a call the parser then reads as text:
		// such syntaxes go unconstrained under auto.
		for _, o := range f.calls.openers() {
			if !o.atStart {
				c.Triggers = append(c.Triggers, o.text)
			}
		}
		if len(c.Triggers) == 0 {
			return Constraint{}, nil
		}
		c.Lazy = true
	}
	if _, err := grammar.ParseGBNF(c.GBNF); err != nil {
		return Constraint{}, fmt.Errorf("reply: the call grammar of format %q does not parse: %w", f.Name, err)
	}
	return c, nil
}

// schemaRules converts schema into GBNF rules whose start rule is named
// name, every other rule renamed under name too, so that the rules of
// several schemas (one per tool) live in one grammar without clashing.
func schemaRules(schema []byte, name string) (start, rules string, err error) {
	text, err := grammar.FromJSONSchema(schema, grammar.Options{Strict: true, InlineWhitespace: true})
	if err != nil {
		return "", "", err
	}
	first, rest, _ := strings.Cut(text, "\n")
	body, ok := strings.CutPrefix(first, "root ::= ")
	if !ok {
		return "", "", fmt.Errorf("reply: unexpected grammar shape")
	}
	rest = strings.TrimRight(grammar.Prefixed(rest, name+"-"), "\n")
	return name, fmt.Sprintf("%s ::= %s\n%s\n", name, grammar.Prefixed(body, name+"-"), rest), nil
}
