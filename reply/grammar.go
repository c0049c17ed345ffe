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
}

// Constraint is a grammar over the reply, as engine.GrammarSpec takes it.
type Constraint struct {
	GBNF string
	// Lazy: the reply is free until one of Triggers appears; the grammar
	// holds from the trigger on (tool_choice "auto").
	Lazy     bool
	Triggers []string // literal texts
}

// Grammar returns the constraint that makes the model's calls valid: under
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
	rules, err := f.calls.grammar(tools, !req.Single, "sf-calls")
	if err != nil {
		return Constraint{}, err
	}
	c := Constraint{GBNF: "root ::= sf-calls\n" + rules}
	if !req.Required {
		c.Lazy = true
		c.Triggers = f.CallOpeners()
	}
	if _, err := grammar.ParseGBNF(c.GBNF); err != nil {
		return Constraint{}, fmt.Errorf("reply: the call grammar of format %q does not parse: %w", f.Name, err)
	}
	return c, nil
}

// schemaRules converts schema into GBNF rules whose start rule is named
// name (the converter's own root renamed).
func schemaRules(schema []byte, name string) (start, rules string, err error) {
	text, err := grammar.FromJSONSchema(schema, grammar.Options{Strict: true})
	if err != nil {
		return "", "", err
	}
	first, rest, _ := strings.Cut(text, "\n")
	body, ok := strings.CutPrefix(first, "root ::= ")
	if !ok {
		return "", "", fmt.Errorf("reply: unexpected grammar shape")
	}
	return name, fmt.Sprintf("%s ::= %s\n%s", name, body, rest), nil
}
