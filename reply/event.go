package reply

import "encoding/json"

// Kind is what an Event carries.
type Kind uint8

const (
	// Content is answer text.
	Content Kind = iota
	// Reasoning is text of the model's reasoning block, without its markers.
	Reasoning
	// Call is one complete, parsed tool call.
	Call
)

func (k Kind) String() string {
	switch k {
	case Content:
		return "content"
	case Reasoning:
		return "reasoning"
	case Call:
		return "call"
	}
	return "unknown"
}

// Event is one piece of a parsed reply.
type Event struct {
	Kind Kind
	Text string   // Content and Reasoning
	Call ToolCall // Call
}

// ToolCall is a call the model made.
type ToolCall struct {
	// ID is the id the model wrote, for the formats that have one (Kimi
	// K2's "functions.get_weather:0"); "" otherwise, and the API assigns one.
	ID   string
	Name string
	// Arguments is a JSON object, compact.
	Arguments json.RawMessage
}
