package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"superfluid/reply"
	"superfluid/task"
)

// OpenAI chat's tool fields, which Ollama's chat also takes: the
// definitions, tool_choice and parallel_tool_calls, and the legacy
// functions/function_call pair.

// ToolFields are the request fields about tools.
type ToolFields struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Functions         json.RawMessage `json:"functions"`
	FunctionCall      json.RawMessage `json:"function_call"`
}

// ReadTools reads the fields into task.Tools. functions and function_call, which OpenAI
// deprecated for tools and tool_choice, mean the same and are read the
// same; a request may not mix the two.
func (o *ToolFields) ReadTools() (task.Tools, error) {
	toolsField, choiceField, raw, choice := "tools", "tool_choice", o.Tools, o.ToolChoice
	legacy := !task.IsNull(o.Functions) || !task.IsNull(o.FunctionCall)
	if legacy {
		if !task.IsNull(o.Tools) || !task.IsNull(o.ToolChoice) {
			return task.Tools{}, BadParam("functions", "functions and function_call cannot be combined with tools and tool_choice")
		}
		toolsField, choiceField, raw, choice = "functions", "function_call", o.Functions, o.FunctionCall
	}
	var list []reply.Tool
	if !task.IsNull(raw) {
		var defs []json.RawMessage
		if err := json.Unmarshal(raw, &defs); err != nil {
			return task.Tools{}, BadParam(toolsField, "%s must be an array", toolsField)
		}
		for i, d := range defs {
			t, err := toolDef(d, legacy)
			if err != nil {
				return task.Tools{}, BadParam(toolsField, "%s[%d]: %v", toolsField, i, err)
			}
			list = append(list, t)
		}
	}
	tt, err := task.NewTools(toolsField, list)
	if err != nil {
		return tt, err
	}
	mode, name, err := toolChoice(choiceField, choice, legacy)
	if err != nil {
		return tt, err
	}
	single := o.ParallelToolCalls != nil && !*o.ParallelToolCalls
	if legacy {
		single = true // a function_call reply held one call
	}
	if err := Convert(tt.Require(choiceField, mode, name, single)); err != nil {
		return tt, err
	}
	return tt, nil
}

// toolDef reads {"type": "function", "function": {name, description,
// parameters, strict}}, or a legacy function definition itself.
func toolDef(raw json.RawMessage, legacy bool) (reply.Tool, error) {
	var fn FunctionDef
	if legacy {
		if err := json.Unmarshal(raw, &fn); err != nil {
			return reply.Tool{}, fmt.Errorf("not a function definition")
		}
	} else {
		var def ToolDef
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

// toolChoice reads tool_choice: "none", "auto", "required", or
// {"type": "function", "function": {"name": …}} (legacy: {"name": …}).
func toolChoice(field string, raw json.RawMessage, legacy bool) (mode, name string, err error) {
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
		return "", "", BadParam(field, "%s %q is not one of none, auto, required or a named function", field, s)
	}
	var named struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil {
		return "", "", BadParam(field, "%s must be a string or a named function", field)
	}
	if !legacy {
		if named.Type != "function" {
			return "", "", BadParam(field, "%s: only {\"type\": \"function\", …} names a tool", field)
		}
		named.Name = named.Function.Name
	}
	if named.Name == "" {
		return "", "", BadParam(field, "%s names no function", field)
	}
	return "named", named.Name, nil
}

// ToolDef is a tool as OpenAI's chat API defines one.
type ToolDef struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}
