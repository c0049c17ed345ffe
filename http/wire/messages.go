package wire

// OpenAI chat messages, which llama.cpp's /apply-template takes too, read
// onto the template's roles.

import (
	"encoding/json"
	"fmt"

	"superfluid/chat"
	"superfluid/task"
)

// Message is a chat message as OpenAI's clients send it.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string, or an array of content parts
	Name    string          `json:"name,omitempty"`
	// An assistant turn's calls, and the call a tool turn answers.
	ToolCalls  []MessageToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	// An assistant turn's reasoning, as llama-server and DeepSeek send it.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type MessageToolCall struct {
	ID       string              `json:"id"`
	Type     string              `json:"type"`
	Function MessageFunctionCall `json:"function"`
}

type MessageFunctionCall struct {
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
		calls, err := MessageToolCalls(i, msg.ToolCalls)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Message{Role: role, Content: text, NoContent: task.IsNull(msg.Content), ReasoningContent: msg.ReasoningContent,
			ToolCalls: calls, ToolCallID: msg.ToolCallID, Name: msg.Name})
	}
	return out, nil
}

// MessageToolCalls reads message i's tool calls. OpenAI sends arguments as a
// JSON string holding an object; an object itself is taken too (some
// clients send one). Anything else is refused naming the field, since a
// template would otherwise print garbage where the call's arguments go.
func MessageToolCalls(i int, in []MessageToolCall) ([]chat.ToolCall, error) {
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
