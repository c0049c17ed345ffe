package reply

import (
	"bytes"
	"encoding/json"
	"strings"
)

// SystemPrompt describes tools and the generic call syntax to a model
// whose template cannot render tools (Format.Generic): the text goes into
// the system turn, as llama.cpp's generic format does. Each tool is one
// line of JSON, as the templates that do render tools list them.
func (f Format) SystemPrompt(tools []Tool) string {
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query. The functions you can call, one JSON object per line:\n<tools>\n")
	for _, t := range tools {
		params := bytes.TrimSpace(t.Parameters)
		if len(params) == 0 {
			params = []byte(`{"type":"object","properties":{}}`)
		}
		def := map[string]any{"name": t.Name, "parameters": json.RawMessage(params)}
		if t.Description != "" {
			def["description"] = t.Description
		}
		line, err := json.Marshal(def)
		if err != nil {
			continue
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteString("</tools>\n\nTo call a function, reply with its name and arguments as a JSON object between tags, one call per block:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>\nOtherwise, answer the user directly.")
	return b.String()
}
