package wire

// The chat messages and tool fields in OpenAI's shape, which OpenAI's chat
// API reads, llama.cpp's /apply-template takes and Ollama's tools and
// tool calls follow.

import (
	"bytes"
	"encoding/json"
	"fmt"

	"superfluid/chat"
	"superfluid/reply"
	"superfluid/task"
)

// Message is one chat message as OpenAI sends it.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string, or an array of content parts
	Name    string          `json:"name,omitempty"`
	// An assistant turn's calls, and the call a tool turn answers.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// An assistant turn's reasoning, as llama-server and DeepSeek send it.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

type FunctionCall struct {
	Name string `json:"name"`
	// Arguments is a JSON string holding a JSON object, as OpenAI sends it.
	Arguments json.RawMessage `json:"arguments"`
}

type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ChatMessages maps OpenAI messages onto the template's roles; content may
// be a string or an array of text parts. An assistant turn's tool calls
// reach the template with their arguments decoded to an object, as
// transformers passes them.
func ChatMessages(in []Message) ([]chat.Message, error) {
	if len(in) == 0 {
		return nil, BadParam("messages", "messages must not be empty")
	}
	out := make([]chat.Message, 0, len(in))
	for i, msg := range in {
		role := msg.Role
		switch role {
		case "developer":
			role = chat.RoleSystem
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, BadParam("messages", "messages[%d]: unknown role %q", i, msg.Role)
		}
		text, err := ContentText(msg.Content)
		if err != nil {
			return nil, BadParam("messages", "messages[%d].content: %v", i, err)
		}
		if len(msg.ToolCalls) > 0 && role != chat.RoleAssistant {
			return nil, BadParam("messages", "messages[%d].tool_calls: only assistant messages carry tool calls", i)
		}
		calls, err := toolCalls(i, msg.ToolCalls)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Message{Role: role, Content: text, NoContent: task.IsNull(msg.Content), ReasoningContent: msg.ReasoningContent,
			ToolCalls: calls, ToolCallID: msg.ToolCallID, Name: msg.Name})
	}
	return out, nil
}

// toolCalls reads message i's tool calls. OpenAI sends arguments as a
// JSON string holding an object; an object itself is taken too (some
// clients send one). Anything else is refused naming the field, since a
// template would otherwise print garbage where the call's arguments go.
func toolCalls(i int, in []ToolCall) ([]chat.ToolCall, error) {
	out := make([]chat.ToolCall, 0, len(in))
	for j, c := range in {
		field := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if c.Type != "" && c.Type != "function" {
			return nil, BadParam("messages", "%s.type: %q is not a function call", field, c.Type)
		}
		if c.Function.Name == "" {
			return nil, BadParam("messages", "%s.function.name: a tool call needs a name", field)
		}
		args, err := CallArguments(c.Function.Arguments)
		if err != nil {
			return nil, BadParam("messages", "%s.function.arguments: %v", field, err)
		}
		out = append(out, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out, nil
}

// ContentText reads message content: a string, null, or text parts.
func ContentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []ContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("expected a string or an array of content parts")
	}
	text := ""
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content parts of type %q are not supported (text only)", p.Type)
		}
		text += p.Text
	}
	return text, nil
}

// ToolFields are the request fields about tools.
type ToolFields struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Functions         json.RawMessage `json:"functions"`
	FunctionCall      json.RawMessage `json:"function_call"`
}

// TurnTools reads the fields into task.Tools. functions and function_call, which OpenAI
// deprecated for tools and tool_choice, mean the same and are read the
// same; a request may not mix the two.
func (o *ToolFields) TurnTools() (task.Tools, error) {
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
	err = Convert(err)
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

// oaiTool reads {"type": "function", "function": {name, description,
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

// oaiChoice reads tool_choice: "none", "auto", "required", or
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
