package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"superfluid/engine"
	"superfluid/grammar"
)

// Structured output. Each API names its own field — OpenAI's
// response_format, llama.cpp's grammar and json_schema, Ollama's format,
// Anthropic's output_config.format — and maps it onto a Constraint; this
// file turns a Constraint into the grammar the scheduler holds the lane
// to, and words every failure as a bad parameter naming the field.
// Nothing a request asks of the output's shape is dropped: what cannot be
// enforced is refused.

// Constraint is what a request asks its output to follow. At most one of
// Schema, AnyObject and GBNF is set.
type Constraint struct {
	Field     string          // the request field, as errors name it
	Schema    json.RawMessage // a JSON Schema
	AnyObject bool            // any JSON object (json_object, Ollama's "json")
	Strict    bool            // objects admit no undeclared properties (grammar.Options.Strict)
	GBNF      string          // a GBNF grammar, as the client wrote it
	// An explicit lazy grammar (llama.cpp's grammar_lazy): constrained only
	// from the first trigger on.
	Lazy     bool
	Patterns []string
	Tokens   []engine.Token
}

// None reports a constraint that asks for nothing.
func (c *Constraint) None() bool { return c.Schema == nil && !c.AnyObject && c.GBNF == "" }

// anyObjectSchema is the schema of "any JSON object": the converter's
// grammar for it is the generic one (any properties, any values).
var anyObjectSchema = json.RawMessage(`{"type":"object"}`)

// GrammarFor converts c into a grammar spec, nil when c asks for nothing.
// templated says the prompt was rendered by the model's chat template:
// then a grammar derived from a schema waits for the end of the model's
// reasoning block, if its template has one (ReasoningEnd). A GBNF grammar
// the client wrote is used as written, as llama.cpp does: it is the
// client's to make lazy.
func GrammarFor(m *Model, c Constraint, prompt []engine.Token, templated bool) (*engine.GrammarSpec, error) {
	if c.None() {
		return nil, nil
	}
	if c.GBNF != "" {
		if _, err := grammar.ParseGBNF(c.GBNF); err != nil {
			return nil, GrammarError(c.Field, err)
		}
		spec := &engine.GrammarSpec{GBNF: c.GBNF, Lazy: c.Lazy, TriggerPatterns: c.Patterns, TriggerTokens: c.Tokens}
		return spec, nil
	}
	schema := c.Schema
	if c.AnyObject {
		schema = anyObjectSchema
	}
	text, err := schemaGrammar(schema, grammar.Options{Strict: c.Strict})
	if err != nil {
		return nil, GrammarError(c.Field, err)
	}
	spec := &engine.GrammarSpec{GBNF: text, Lazy: c.Lazy, TriggerPatterns: c.Patterns, TriggerTokens: c.Tokens}
	if templated && !c.Lazy {
		if end, ok := ReasoningEnd(m, prompt); ok {
			AfterReasoning(spec, end)
		}
	}
	return spec, nil
}

// AfterReasoning makes spec wait for the reasoning block's end. The engine,
// like llama.cpp, feeds the text from the trigger on to the grammar, so
// the grammar starts with the end marker (optional, so that a grammar
// started right after the marker holds too) and the whitespace models put
// between reasoning and answer.
func AfterReasoning(spec *engine.GrammarSpec, end ReasoningMarker) {
	root := UnusedRuleName(spec.GBNF, "answer-after-reasoning")
	spec.GBNF += fmt.Sprintf("%s ::= ( %s [ \\t\\n]{0,8} )? root\n", root, grammar.Literal(end.Text))
	spec.Root = root
	spec.Lazy = true
	if end.Single {
		spec.TriggerTokens = []engine.Token{end.Token}
	} else {
		spec.TriggerPatterns = []string{RegexpQuote(end.Text)}
	}
}

// UnusedRuleName is name, or name with a number after it, such that no
// rule of text is called that (schema property names become rule names).
func UnusedRuleName(text, name string) string {
	taken := func(n string) bool {
		return strings.HasPrefix(text, n+" ::=") || strings.Contains(text, "\n"+n+" ::=")
	}
	try := name
	for i := 2; taken(try); i++ {
		try = fmt.Sprintf("%s-%d", name, i)
	}
	return try
}

// RegexpQuote escapes s for a trigger pattern: the metacharacters of the
// ECMAScript and RE2 dialects alike.
func RegexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\^$.|?*+()[]{}/`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Converted schemas, by options and text: scripts and batches send the
// same schema with every request, and a large one takes milliseconds to
// convert. Bounded in entries and in bytes (a schema may be megabytes,
// and so may its grammar); cleared whole when full (schemas repeat, so it
// fills again with the ones in use). A schema's grammar does not depend
// on the model, so the cache outlives any one.
const (
	schemaCacheSize  = 256
	schemaCacheBytes = 64 << 20
)

var schemaCache = struct {
	sync.Mutex
	m     map[string]schemaConversion
	bytes int
}{m: map[string]schemaConversion{}}

type schemaConversion struct {
	gbnf string
	err  error
}

// schemaGrammar is grammar.FromJSONSchema, remembered.
func schemaGrammar(schema json.RawMessage, opts grammar.Options) (string, error) {
	var key bytes.Buffer
	fmt.Fprintf(&key, "%v|%v|", opts.Strict, opts.CompactWhitespace)
	if json.Compact(&key, schema) != nil {
		key.Write(schema)
	}
	k := key.String()
	schemaCache.Lock()
	c, ok := schemaCache.m[k]
	schemaCache.Unlock()
	if ok {
		return c.gbnf, c.err
	}
	c.gbnf, c.err = grammar.FromJSONSchema(schema, opts)
	size := len(k) + len(c.gbnf)
	schemaCache.Lock()
	if len(schemaCache.m) >= schemaCacheSize || schemaCache.bytes+size > schemaCacheBytes {
		clear(schemaCache.m)
		schemaCache.bytes = 0
	}
	if size <= schemaCacheBytes {
		schemaCache.m[k] = c
		schemaCache.bytes += size
	}
	schemaCache.Unlock()
	return c.gbnf, c.err
}

// IsNull reports an absent or null field.
func IsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// SchemaValue checks that raw can be a JSON Schema (an object or a
// boolean) before the converter sees it.
func SchemaValue(field string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if IsNull(raw) {
		return nil, BadParam(field, "%s: a JSON Schema is required", field)
	}
	if raw[0] != '{' && string(raw) != "true" && string(raw) != "false" {
		return nil, BadParam(field, "%s: a JSON Schema must be an object or a boolean", field)
	}
	return raw, nil
}
