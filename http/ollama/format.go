package ollama

import (
	"bytes"
	"encoding/json"

	"superfluid/http/wire"
	"superfluid/task"
)

// readFormat reads Ollama's format: "json" (any JSON object) or a JSON
// Schema. Ollama's converter, like llama.cpp's, admits no undeclared
// properties, hence strict.
func readFormat(raw json.RawMessage) (task.Constraint, error) {
	raw = bytes.TrimSpace(raw)
	if task.IsNull(raw) || string(raw) == `""` {
		return task.Constraint{}, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil || s != "json" {
			return task.Constraint{}, wire.BadParam("format", `invalid format: expected "json" or a valid JSON schema`)
		}
		return task.Constraint{Field: "format", AnyObject: true}, nil
	}
	schema, err := task.SchemaValue("format", raw)
	if err != nil {
		return task.Constraint{}, wire.BadParam("format", `invalid format: expected "json" or a valid JSON schema`)
	}
	return task.Constraint{Field: "format", Schema: schema, Strict: true}, nil
}
