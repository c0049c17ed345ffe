package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"superfluid/reply"
)

// CallArguments returns a call's arguments, as a client sends them back
// in a conversation, as a JSON object: raw is a JSON string holding one
// (OpenAI), or the object itself (Ollama).
func CallArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("not a valid JSON string")
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			// Clients send "" for a call that takes no arguments.
			return json.RawMessage(`{}`), nil
		}
	}
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("must be a JSON object (or a string holding one)")
	}
	return raw, nil
}

// CallID is the id a call is reported with: the model's own, else a new
// one. Clients send it back with the tool's result, which is how the
// template ties the two.
func CallID(c reply.ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return NewID("call_")
}
