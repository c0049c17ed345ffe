package chat

import (
	"encoding/json"
	"fmt"
)

// Roles a Message may have. The HTTP layer maps API-specific roles onto
// these (OpenAI's "developer" is a system message) before rendering.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // one of the Role constants
	Content string // plain text; never interpreted as template syntax
	// NoContent says the message had no content at all (OpenAI's null, a
	// turn of calls and no text): templates then see content as none,
	// and some write a turn's calls only then (DeepSeek-R1's distills).
	NoContent bool
	// ReasoningContent is an assistant turn's reasoning, which templates
	// with a reasoning block (Qwen3, DeepSeek R1) read as reasoning_content.
	ReasoningContent string

	// ToolCalls are the calls an assistant turn made; templates see them as
	// OpenAI shapes them: {id, type: "function", function: {name, arguments}}.
	ToolCalls []ToolCall
	// ToolCallID and Name tie a tool turn to the call it answers.
	ToolCallID, Name string
}

// ToolCall is one function call of an assistant turn.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the call's arguments as a JSON object. Templates see an
	// object, as transformers passes it, never the JSON string OpenAI
	// clients send (the HTTP layer decodes that string).
	Arguments json.RawMessage
}

// Request is everything a render takes besides the template.
type Request struct {
	Messages            []Message
	AddGenerationPrompt bool
	// Tools are the tool definitions as the client sent them (OpenAI's
	// {type: "function", function: {name, description, parameters}}), each
	// a JSON object; templates see them as the list tools, or none when
	// there are no tools.
	Tools []json.RawMessage
	// Kwargs are further template variables (chat_template_kwargs, such as
	// enable_thinking), each a JSON value. They cannot replace the
	// variables above.
	Kwargs map[string]json.RawMessage
}

// checkMessages rejects what no template can render sensibly: an empty
// conversation, and roles outside the four every API maps onto. Without
// this a template that branches on role would silently drop an unknown one.
func checkMessages(msgs []Message) error {
	if len(msgs) == 0 {
		return ErrNoMessages
	}
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return fmt.Errorf("chat: message %d: %w %q", i, ErrUnknownRole, m.Role)
		}
	}
	return nil
}

// foldSystem returns msgs with system messages merged into the user message
// that follows them, for templates that cannot show a system message. It
// follows llama.cpp (minja's system-role polyfill) so that a prompt renders
// the same here as there: pending system texts are joined with "\n", put in
// front of the next user content with "\n" between (no separator when that
// content is empty), and flushed as a user message of their own before any
// other role or at the end. Empty system texts vanish. msgs is not modified.
func foldSystem(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	pending := ""
	for _, m := range msgs {
		switch m.Role {
		case RoleSystem:
			if pending != "" && m.Content != "" {
				pending += "\n"
			}
			pending += m.Content
			continue
		case RoleUser:
			if pending != "" && m.Content != "" {
				m.Content = pending + "\n" + m.Content
			} else if pending != "" {
				m.Content = pending
			}
		default:
			if pending != "" {
				out = append(out, Message{Role: RoleUser, Content: pending})
			}
		}
		pending = ""
		out = append(out, m)
	}
	if pending != "" {
		out = append(out, Message{Role: RoleUser, Content: pending})
	}
	return out
}
