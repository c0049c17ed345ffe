package anthropic

import (
	"bytes"
	"encoding/json"

	"superfluid/http/wire"
	"superfluid/task"
)

// formatSpec is output_config.format (and the structured-outputs beta's
// output_format): {"type": "json_schema", "schema": {…}}.
type formatSpec struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// outputFormat reads output_config.format or output_format (not both).
// Anthropic's structured outputs require additionalProperties false on
// every object, so undeclared properties are never admitted.
func outputFormat(config, beta json.RawMessage) (task.Constraint, error) {
	field, raw := "output_config.format", config
	switch {
	case !task.IsNull(config) && !task.IsNull(beta):
		return task.Constraint{}, wire.BadParam("output_format", "output_format is the older name of output_config.format; send one")
	case task.IsNull(config):
		field, raw = "output_format", beta
	}
	if task.IsNull(raw) {
		return task.Constraint{}, nil
	}
	var f formatSpec
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return task.Constraint{}, wire.BadParam(field, `%s: Input should be an object {"type": "json_schema", "schema": {…}}`, field)
	}
	if f.Type != "json_schema" {
		return task.Constraint{}, wire.BadParam(field, "%s.type: Input should be 'json_schema'", field)
	}
	schema, err := result(task.SchemaValue(field+".schema", f.Schema))
	if err != nil {
		return task.Constraint{}, err
	}
	return task.Constraint{Field: field + ".schema", Schema: schema, Strict: true}, nil
}
