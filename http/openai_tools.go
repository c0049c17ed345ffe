package http

import (
	"superfluid/http/wire"
	"superfluid/reply"
)

// OpenAI chat's reply calls in the shape clients read them; the tool
// fields are read by wire.ToolFields (Ollama's chat reads them too).

// oaiReplyCalls are a turn's calls as OpenAI returns them: each with an
// id (the model's own when its format writes one), arguments as a JSON
// string.
func oaiReplyCalls(calls []reply.ToolCall) []oaiToolCallOut {
	out := make([]oaiToolCallOut, len(calls))
	for i, c := range calls {
		out[i] = oaiToolCallOut{ID: wire.CallID(c), Type: "function",
			Function: oaiFunctionOut{Name: c.Name, Arguments: string(c.Arguments)}}
	}
	return out
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
