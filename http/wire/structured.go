package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"superfluid/engine"
	"superfluid/task"
)

// Each API's structured-output field, read into a task.Constraint.

// StructuredFields are the structured-output fields of llama.cpp's bodies
// (/completion, /infill) and of the OpenAI endpoints, which llama-server
// takes on all of them: OpenAI's response_format, llama.cpp's json_schema
// and grammar, and the lazy grammar's grammar_lazy and grammar_triggers.
type StructuredFields struct {
	ResponseFormat  json.RawMessage `json:"response_format"`
	JSONSchema      json.RawMessage `json:"json_schema"`
	Grammar         json.RawMessage `json:"grammar"`
	GrammarLazy     json.RawMessage `json:"grammar_lazy"`
	GrammarTriggers json.RawMessage `json:"grammar_triggers"`
}

// oaiResponseFormat is response_format: {"type": "text" | "json_object" |
// "json_schema", "json_schema": {name, description, schema, strict}}, and
// llama.cpp's {"type": "json_object", "schema": …}.
type oaiResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
	Schema json.RawMessage `json:"schema"`
}

// Bounds of a lazy grammar's triggers.
const (
	maxGrammarTriggers = 64
	maxTriggerBytes    = 1024
)

// Constraint reads the fields; at most one of response_format (other than
// text), json_schema and grammar may ask for something, since llama.cpp
// would silently prefer one.
func (f *StructuredFields) Constraint(m *task.Model) (task.Constraint, error) {
	var set []task.Constraint
	if rf, err := ResponseFormat(f.ResponseFormat); err != nil {
		return task.Constraint{}, err
	} else if !rf.None() {
		set = append(set, rf)
	}
	if !task.IsNull(f.JSONSchema) {
		schema, err := task.SchemaValue("json_schema", f.JSONSchema)
		if err != nil {
			return task.Constraint{}, err
		}
		// llama.cpp's converter admits no undeclared properties unless the
		// schema says additionalProperties.
		set = append(set, task.Constraint{Field: "json_schema", Schema: schema, Strict: true})
	}
	if !task.IsNull(f.Grammar) {
		var text string
		if json.Unmarshal(f.Grammar, &text) != nil {
			return task.Constraint{}, BadParam("grammar", "grammar must be a string of GBNF rules")
		}
		if text != "" {
			set = append(set, task.Constraint{Field: "grammar", GBNF: text})
		}
	}
	if len(set) > 1 {
		return task.Constraint{}, BadParam(set[1].Field, "%s and %s both constrain the output; send one", set[0].Field, set[1].Field)
	}
	var c task.Constraint
	if len(set) == 1 {
		c = set[0]
	}
	if err := f.LazyGrammar(m, &c); err != nil {
		return task.Constraint{}, err
	}
	return c, nil
}

// ResponseFormat reads OpenAI's response_format.
func ResponseFormat(raw json.RawMessage) (task.Constraint, error) {
	const field = "response_format"
	if task.IsNull(raw) {
		return task.Constraint{}, nil
	}
	var rf oaiResponseFormat
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &rf) != nil {
		return task.Constraint{}, BadParam(field, `response_format must be an object such as {"type": "json_schema", "json_schema": {"name": …, "schema": {…}}}`)
	}
	switch rf.Type {
	case "text":
		return task.Constraint{}, nil
	case "json_object":
		if !task.IsNull(rf.Schema) { // llama.cpp's extension
			schema, err := task.SchemaValue(field+".schema", rf.Schema)
			return task.Constraint{Field: field + ".schema", Schema: schema, Strict: true}, err
		}
		return task.Constraint{Field: field, AnyObject: true}, nil
	case "json_schema":
		if rf.JSONSchema == nil {
			return task.Constraint{}, BadParam(field+".json_schema", "response_format.json_schema is required when type is \"json_schema\"")
		}
		schema, err := task.SchemaValue(field+".json_schema.schema", rf.JSONSchema.Schema)
		if err != nil {
			return task.Constraint{}, err
		}
		strict := rf.JSONSchema.Strict != nil && *rf.JSONSchema.Strict
		return task.Constraint{Field: field + ".json_schema.schema", Schema: schema, Strict: strict}, nil
	case "":
		return task.Constraint{}, BadParam(field+".type", "response_format.type is required: \"text\", \"json_object\" or \"json_schema\"")
	}
	return task.Constraint{}, BadParam(field+".type", "response_format.type %q is not one of \"text\", \"json_object\", \"json_schema\"", rf.Type)
}

// LlamaTrigger is one of grammar_triggers, as llama-server reads it: type
// 0 a token (by id), 1 a word, 2 a pattern found anywhere, 3 a pattern the
// whole output must match.
type LlamaTrigger struct {
	Type  *int   `json:"type"`
	Value string `json:"value"`
	Token *int64 `json:"token"`
}

// LazyGrammar reads grammar_lazy and grammar_triggers into c.
func (f *StructuredFields) LazyGrammar(m *task.Model, c *task.Constraint) error {
	lazy := false
	if !task.IsNull(f.GrammarLazy) && json.Unmarshal(f.GrammarLazy, &lazy) != nil {
		return BadParam("grammar_lazy", "grammar_lazy must be a boolean")
	}
	var triggers []LlamaTrigger
	if !task.IsNull(f.GrammarTriggers) && json.Unmarshal(f.GrammarTriggers, &triggers) != nil {
		return BadParam("grammar_triggers", `grammar_triggers must be an array of {"type": 0–2, "value": …, "token": …}`)
	}
	switch {
	case !lazy && len(triggers) == 0:
		return nil
	case !lazy:
		return BadParam("grammar_triggers", "grammar_triggers need grammar_lazy: true")
	case c.None():
		return BadParam("grammar_lazy", "grammar_lazy needs a grammar or a json_schema to apply lazily")
	case len(triggers) == 0:
		return BadParam("grammar_triggers", "a lazy grammar needs at least one trigger in grammar_triggers")
	case len(triggers) > maxGrammarTriggers:
		return BadParam("grammar_triggers", "at most %d grammar_triggers", maxGrammarTriggers)
	}
	c.Lazy = true
	for i, t := range triggers {
		at := fmt.Sprintf("grammar_triggers[%d]", i)
		if t.Type == nil {
			return BadParam("grammar_triggers", "%s.type is required: 0 (token), 1 (word) or 2 (pattern)", at)
		}
		if len(t.Value) > maxTriggerBytes {
			return BadParam("grammar_triggers", "%s.value is longer than %d bytes", at, maxTriggerBytes)
		}
		switch *t.Type {
		case 0:
			if t.Token == nil || *t.Token < 0 || *t.Token >= int64(m.Desc.Vocab) {
				return BadParam("grammar_triggers", "%s.token must be a token id of this model", at)
			}
			c.Tokens = append(c.Tokens, engine.Token(*t.Token))
		case 1:
			if t.Value == "" {
				return BadParam("grammar_triggers", "%s.value must not be empty", at)
			}
			c.Patterns = append(c.Patterns, task.RegexpQuote(t.Value))
		case 2:
			if t.Value == "" {
				return BadParam("grammar_triggers", "%s.value must not be empty", at)
			}
			c.Patterns = append(c.Patterns, t.Value)
		case 3:
			e := NotSupported("grammar_triggers", "a trigger pattern the whole output must match (type 3) is not supported; use type 2, a pattern found anywhere")
			e.Msg = at + ": " + e.Msg
			return e
		default:
			return BadParam("grammar_triggers", "%s.type %d is not 0 (token), 1 (word) or 2 (pattern)", at, *t.Type)
		}
	}
	return nil
}

// OllamaFormat reads Ollama's format: "json" (any JSON object) or a JSON
// Schema. Ollama's converter, like llama.cpp's, admits no undeclared
// properties, hence strict.
func OllamaFormat(raw json.RawMessage) (task.Constraint, error) {
	raw = bytes.TrimSpace(raw)
	if task.IsNull(raw) || string(raw) == `""` {
		return task.Constraint{}, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil || s != "json" {
			return task.Constraint{}, BadParam("format", `invalid format: expected "json" or a valid JSON schema`)
		}
		return task.Constraint{Field: "format", AnyObject: true}, nil
	}
	schema, err := task.SchemaValue("format", raw)
	if err != nil {
		return task.Constraint{}, BadParam("format", `invalid format: expected "json" or a valid JSON schema`)
	}
	return task.Constraint{Field: "format", Schema: schema, Strict: true}, nil
}

// anthropicOutputFormat is output_config.format (and the beta's
// output_format): {"type": "json_schema", "schema": {…}}.
type anthropicOutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// AnthropicFormat reads output_config.format or output_format (not both).
// Anthropic's structured outputs require additionalProperties false on
// every object, so undeclared properties are never admitted.
func AnthropicFormat(config, beta json.RawMessage) (task.Constraint, error) {
	field, raw := "output_config.format", config
	switch {
	case !task.IsNull(config) && !task.IsNull(beta):
		return task.Constraint{}, BadParam("output_format", "output_format is the older name of output_config.format; send one")
	case task.IsNull(config):
		field, raw = "output_format", beta
	}
	if task.IsNull(raw) {
		return task.Constraint{}, nil
	}
	var f anthropicOutputFormat
	if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return task.Constraint{}, BadParam(field, `%s: Input should be an object {"type": "json_schema", "schema": {…}}`, field)
	}
	if f.Type != "json_schema" {
		return task.Constraint{}, BadParam(field, "%s.type: Input should be 'json_schema'", field)
	}
	schema, err := task.SchemaValue(field+".schema", f.Schema)
	if err != nil {
		return task.Constraint{}, err
	}
	return task.Constraint{Field: field + ".schema", Schema: schema, Strict: true}, nil
}
