package chat

import (
	"fmt"

	"github.com/ardanlabs/jinja"
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

// messageValues converts msgs into the list the template sees as messages.
// Each message is a fresh dict so that a template that mutates one (dict
// .update()) cannot affect another render.
func messageValues(msgs []Message) jinja.Value {
	items := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		dict.Set("content", jinja.NewString(m.Content))
		items[i] = d
	}
	return jinja.NewList(items)
}
