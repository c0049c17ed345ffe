package responses

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// Reading a Responses request's conversation and tools into a task.Chat.

// respInputItems splits input into its items: a string is one user
// message, a list is the items themselves.
func respInputItems(raw json.RawMessage) ([]json.RawMessage, error) {
	if task.IsNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		item, _ := json.Marshal(map[string]string{"type": "message", "role": "user", "content": s})
		return []json.RawMessage{item}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, wire.BadParam("input", "input must be a string or a list of items")
	}
	return items, nil
}

// respConversation maps items onto the template's messages. An assistant
// turn is written by several items — its reasoning, its message, each of
// its function calls — that become one assistant message, as the chat
// templates expect; a function_call_output is a tool message answering
// its call by call_id. where names item i in errors (the items of a
// previous response come before the request's own). A user message's
// images are read into img.
func respConversation(items []json.RawMessage, where func(i int) string, img *respImages) ([]chat.Message, error) {
	var (
		out       []chat.Message
		open      = -1 // the assistant message items are still adding to
		reasoning string
		callNames = map[string]string{}
	)
	for i, raw := range items {
		var it respItemIn
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, wire.BadParam("input", "%s: not an input item (%v)", where(i), err)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message" // EasyInputMessage: {role, content}
		}
		switch it.Type {
		case "message":
			role := it.Role
			switch role {
			case "developer":
				role = chat.RoleSystem
			case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant:
			default:
				return nil, wire.BadParam("input", "%s.role: %q is not user, assistant, system or developer", where(i), it.Role)
			}
			text, err := respContent(it.Content, img.reader(role, where(i)))
			if err != nil {
				return nil, wire.BadParam("input", "%s.content: %v", where(i), err)
			}
			if role != chat.RoleAssistant {
				out = append(out, chat.Message{Role: role, Content: text})
				open = -1
				continue
			}
			if open >= 0 && len(out[open].ToolCalls) == 0 {
				out[open].Content += text
				continue
			}
			out = append(out, chat.Message{Role: chat.RoleAssistant, Content: text, ReasoningContent: reasoning})
			open, reasoning = len(out)-1, ""
		case "function_call":
			if it.Name == "" {
				return nil, wire.BadParam("input", "%s.name: a function call needs a name", where(i))
			}
			if it.CallID == "" {
				return nil, wire.BadParam("input", "%s.call_id: a function call needs a call_id", where(i))
			}
			args, err := wire.CallArguments(it.Arguments)
			if err != nil {
				return nil, wire.BadParam("input", "%s.arguments: %v", where(i), err)
			}
			if open < 0 {
				out = append(out, chat.Message{Role: chat.RoleAssistant, ReasoningContent: reasoning})
				open, reasoning = len(out)-1, ""
			}
			out[open].ToolCalls = append(out[open].ToolCalls, chat.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
			callNames[it.CallID] = it.Name
		case "function_call_output":
			if it.CallID == "" {
				return nil, wire.BadParam("input", "%s.call_id: a function call output needs the call_id of its call", where(i))
			}
			text, err := respOutputText(it.Output)
			if err != nil {
				return nil, wire.BadParam("input", "%s.output: %v", where(i), err)
			}
			out = append(out, chat.Message{Role: chat.RoleTool, Content: text, ToolCallID: it.CallID, Name: callNames[it.CallID]})
			open = -1
		case "reasoning":
			// Reasoning opens the assistant turn it precedes.
			open = -1
			reasoning += respReasoningText(it)
		case "":
			return nil, wire.BadParam("input", "%s.type is required", where(i))
		default:
			return nil, wire.BadParam("input", "%s.type: %q items are not supported (message, function_call, function_call_output and reasoning are)", where(i), it.Type)
		}
	}
	if len(out) == 0 {
		return nil, wire.BadParam("input", "input has no messages")
	}
	return task.CallOnlyTurns(out), nil
}

// respContentText reads a message's content: a string or a list of text
// parts (input_text, output_text; a refusal's text).
func respContentText(raw json.RawMessage) (string, error) { return respContent(raw, nil) }

// respContent is respContentText taking input_image parts through image
// (nil: refused), which returns the text that stands for the image.
func respContent(raw json.RawMessage, image func(j int, p respTextPart) (string, error)) (string, error) {
	if task.IsNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []respTextPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("expected a string or a list of content parts")
	}
	var b strings.Builder
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			b.WriteString(p.Text)
		case "refusal":
			b.WriteString(p.Refusal)
		case "input_image":
			if image == nil {
				return "", fmt.Errorf("[%d]: input_image parts are taken in message content only", j)
			}
			marker, err := image(j, p)
			if err != nil {
				return "", err
			}
			b.WriteString(marker)
		default:
			return "", fmt.Errorf("[%d]: %q parts are not supported (input_text, output_text, refusal and input_image are)", j, p.Type)
		}
	}
	return b.String(), nil
}

// respOutputText reads a function call's output: a string, or a list of
// input_text parts.
func respOutputText(raw json.RawMessage) (string, error) {
	if task.IsNull(raw) {
		return "", fmt.Errorf("a function call output needs an output")
	}
	return respContentText(raw)
}

// respReasoningText is a reasoning item's text: its content when it has
// some, else its summary (what OpenAI's models return).
func respReasoningText(it respItemIn) string {
	var b strings.Builder
	var content []respTextPart
	if json.Unmarshal(it.Content, &content) == nil {
		for _, p := range content {
			b.WriteString(p.Text)
		}
	}
	if b.Len() > 0 {
		return b.String()
	}
	for j, p := range it.Summary {
		if j > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// respToolDef is a tool as the Responses API declares one: a function's
// fields sit beside its type.
type respToolDef struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// respTools reads the function tools. The hosted tools (web_search,
// file_search, code_interpreter …) and the others a server cannot run
// for the client are skipped with a warning: agents send them by habit,
// and the model answers without them. It returns the tools as the
// response echoes them.
func respTools(in []json.RawMessage) (task.Tools, []json.RawMessage, error) {
	var list []reply.Tool
	echo := []json.RawMessage{}
	for i, raw := range in {
		var d respToolDef
		if err := json.Unmarshal(raw, &d); err != nil {
			return task.Tools{}, nil, wire.BadParam("tools", "tools[%d]: not a tool (%v)", i, err)
		}
		if d.Type != "function" {
			slog.Warn("responses: skipping a tool this server cannot run", "index", i, "type", d.Type, "name", d.Name)
			continue
		}
		list = append(list, reply.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
		echo = append(echo, raw)
	}
	t, err := task.NewTools("tools", list)
	return t, echo, err
}

// respToolChoice applies tool_choice: "none", "auto", "required", or
// {"type": "function", "name": …}. A choice of a hosted tool, or of
// allowed_tools, is refused by name: it demands what the server cannot do.
func respToolChoice(t *task.Tools, raw json.RawMessage, parallel bool) error {
	single := !parallel
	if task.IsNull(raw) {
		return wire.Convert(t.Require("tool_choice", "auto", "", single))
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		if mode == "named" {
			return wire.BadParam("tool_choice", "tool_choice: unknown mode %q", mode)
		}
		return wire.Convert(t.Require("tool_choice", mode, "", single))
	}
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return wire.BadParam("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "name": …}`)
	}
	if obj.Type != "function" {
		return wire.NotSupported("tool_choice", fmt.Sprintf("a tool_choice of type %q; only function tools are run", obj.Type))
	}
	return wire.Convert(t.Require("tool_choice", "named", obj.Name, single))
}

// respFormat reads text.format into the structured-output constraint.
func respFormat(raw json.RawMessage) (task.Constraint, error) {
	const field = "text.format"
	if task.IsNull(raw) {
		return task.Constraint{}, nil
	}
	var f respTextFormat
	if err := json.Unmarshal(raw, &f); err != nil {
		return task.Constraint{}, wire.BadParam(field, `text.format must be an object such as {"type": "json_schema", "name": …, "schema": {…}}`)
	}
	switch f.Type {
	case "text":
		return task.Constraint{}, nil
	case "json_object":
		return task.Constraint{Field: field, AnyObject: true}, nil
	case "json_schema":
		schema, err := task.SchemaValue(field+".schema", f.Schema)
		if err != nil {
			return task.Constraint{}, err
		}
		return task.Constraint{Field: field + ".schema", Schema: schema, Strict: f.Strict != nil && *f.Strict}, nil
	}
	return task.Constraint{}, wire.BadParam(field+".type", "text.format.type %q is not one of \"text\", \"json_object\", \"json_schema\"", f.Type)
}
