package chat

import "errors"

// ErrNoMessages is returned by Render for an empty conversation: templates
// index messages[0] freely, and a prompt with no turn has nothing to answer.
var ErrNoMessages = errors.New("chat: no messages")

// ErrUnknownRole is wrapped by Render's error for a message whose role is
// not one of the Role constants.
var ErrUnknownRole = errors.New("unknown role")

// errEnginePanic marks a panic recovered from the Jinja engine. It is kept
// apart from template errors so that the fuzz tests can tell an engine bug
// from a template legitimately refusing its input.
var errEnginePanic = errors.New("template engine panicked")

// RaiseError is the error of a template that called raise_exception: the
// template's author refusing the conversation ("Conversation roles must
// alternate user/assistant/user/assistant/..."). Message is the template's
// own text, fit to show to the client as the reason for a 400.
type RaiseError struct {
	Message string
}

func (e *RaiseError) Error() string {
	return "template raised an exception: " + e.Message
}

// ErrBadArguments is wrapped by Render's error for a tool call whose
// arguments are not a JSON object.
var ErrBadArguments = errors.New("tool call arguments are not a JSON object")

// ErrBadTool is wrapped by Render's error for a tool definition that is
// not a JSON object.
var ErrBadTool = errors.New("tool definition is not a JSON object")
