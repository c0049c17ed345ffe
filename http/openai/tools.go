package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// OpenAI chat's tools: the definitions, tool_choice and
// parallel_tool_calls, the legacy functions/function_call pair, and the
// reply's calls in the shape clients read them.

// oaiTools are the request fields about tools.
type oaiTools struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Functions         json.RawMessage `json:"functions"`
	FunctionCall      json.RawMessage `json:"function_call"`
}

// task.Tools reads the fields. functions and function_call, which OpenAI
// deprecated for tools and tool_choice, mean the same and are read the
// same; a request may not mix the two.
func (o *oaiTools) turnTools() (task.Tools, error) {
	toolsField, choiceField, raw, choice := "tools", "tool_choice", o.Tools, o.ToolChoice
	legacy := !task.IsNull(o.Functions) || !task.IsNull(o.FunctionCall)
	if legacy {
		if !task.IsNull(o.Tools) || !task.IsNull(o.ToolChoice) {
			return task.Tools{}, wire.BadParam("functions", "functions and function_call cannot be combined with tools and tool_choice")
		}
		toolsField, choiceField, raw, choice = "functions", "function_call", o.Functions, o.FunctionCall
	}
	var list []reply.Tool
	if !task.IsNull(raw) {
		var defs []json.RawMessage
		if err := json.Unmarshal(raw, &defs); err != nil {
			return task.Tools{}, wire.BadParam(toolsField, "%s must be an array", toolsField)
		}
		for i, d := range defs {
			t, err := oaiTool(d, legacy)
			if err != nil {
				return task.Tools{}, wire.BadParam(toolsField, "%s[%d]: %v", toolsField, i, err)
			}
			list = append(list, t)
		}
	}
	tt, err := task.NewTools(toolsField, list)
	err = wire.Convert(err)
	if err != nil {
		return tt, err
	}
	mode, name, err := oaiChoice(choiceField, choice, legacy)
	if err != nil {
		return tt, err
	}
	single := o.ParallelToolCalls != nil && !*o.ParallelToolCalls
	if legacy {
		single = true // a function_call reply held one call
	}
	if err := wire.Convert(tt.Require(choiceField, mode, name, single)); err != nil {
		return tt, err
	}
	return tt, nil
}

// oaiTool reads {"type": "function", "function": {name, description,
// parameters, strict}}, or a legacy function definition itself.
func oaiTool(raw json.RawMessage, legacy bool) (reply.Tool, error) {
	var fn oaiFunctionDef
	if legacy {
		if err := json.Unmarshal(raw, &fn); err != nil {
			return reply.Tool{}, fmt.Errorf("not a function definition")
		}
	} else {
		var def oaiToolDef
		if err := json.Unmarshal(raw, &def); err != nil {
			return reply.Tool{}, fmt.Errorf("not a tool definition")
		}
		if def.Type != "function" {
			return reply.Tool{}, fmt.Errorf("tools of type %q are not supported (function only)", def.Type)
		}
		fn = def.Function
	}
	return reply.Tool{Name: fn.Name, Description: fn.Description, Parameters: bytes.TrimSpace(fn.Parameters)}, nil
}

// oaiChoice reads tool_choice: "none", "auto", "required", or
// {"type": "function", "function": {"name": …}} (legacy: {"name": …}).
func oaiChoice(field string, raw json.RawMessage, legacy bool) (mode, name string, err error) {
	if task.IsNull(raw) {
		return "auto", "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto":
			return s, "", nil
		case "required":
			if !legacy {
				return s, "", nil
			}
		}
		return "", "", wire.BadParam(field, "%s %q is not one of none, auto, required or a named function", field, s)
	}
	var named struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil {
		return "", "", wire.BadParam(field, "%s must be a string or a named function", field)
	}
	if !legacy {
		if named.Type != "function" {
			return "", "", wire.BadParam(field, "%s: only {\"type\": \"function\", …} names a tool", field)
		}
		named.Name = named.Function.Name
	}
	if named.Name == "" {
		return "", "", wire.BadParam(field, "%s names no function", field)
	}
	return "named", named.Name, nil
}

// oaiReplyCalls are a turn's calls as OpenAI returns them: each with an
// id (the model's own when its format writes one), arguments as a JSON
// string.
func oaiReplyCalls(calls []reply.ToolCall) []oaiToolCallOut {
	out := make([]oaiToolCallOut, len(calls))
	for i, c := range calls {
		out[i] = oaiToolCallOut{ID: callID(c), Type: "function",
			Function: oaiFunctionOut{Name: c.Name, Arguments: string(c.Arguments)}}
	}
	return out
}

// callID is the id a call is reported with: the model's own, else a new
// one. Clients send it back with the tool's result, which is how the
// template ties the two.
func callID(c reply.ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return wire.NewID("call_")
}

// oaiToolCallOut is a call in a response: in message.tool_calls, and in a
// stream's delta.tool_calls, where index says which call a fragment
// extends and only the first fragment carries id, type and name.
type oaiToolCallOut struct {
	Index    *int           `json:"index,omitempty"`
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function oaiFunctionOut `json:"function"`
}

type oaiFunctionOut struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}
