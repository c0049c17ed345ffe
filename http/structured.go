package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"superfluid/engine"
	"superfluid/grammar"
	"superfluid/task"
)

// Structured output. Each API names its own field — OpenAI's
// response_format, llama.cpp's grammar and json_schema, Ollama's format,
// Anthropic's output_config.format — and maps it onto a constraint; this
// file turns a constraint into the grammar the scheduler holds the lane
// to, and words every failure as a 400 naming the field. Nothing a request
// asks of the output's shape is dropped: what cannot be enforced is
// refused.

// constraint is what a request asks its output to follow. At most one of
// schema, anyObject and gbnf is set.
type constraint struct {
	field     string          // the request field, as errors name it
	schema    json.RawMessage // a JSON Schema
	anyObject bool            // any JSON object (json_object, Ollama's "json")
	strict    bool            // objects admit no undeclared properties (grammar.Options.Strict)
	gbnf      string          // a GBNF grammar, as the client wrote it
	// An explicit lazy grammar (llama.cpp's grammar_lazy): constrained only
	// from the first trigger on.
	lazy     bool
	patterns []string
	tokens   []engine.Token
}

func (c *constraint) none() bool { return c.schema == nil && !c.anyObject && c.gbnf == "" }

// anyObjectSchema is the schema of "any JSON object": the converter's
// grammar for it is the generic one (any properties, any values).
var anyObjectSchema = json.RawMessage(`{"type":"object"}`)

// grammarFor converts c into a grammar spec, nil when c asks for nothing.
// templated says the prompt was rendered by the model's chat template:
// then a grammar derived from a schema waits for the end of the model's
// reasoning block, if its template has one (reasoningEnd). A GBNF grammar
// the client wrote is used as written, as llama.cpp does: it is the
// client's to make lazy.
func grammarFor(m *Model, c constraint, prompt []engine.Token, templated bool) (*engine.GrammarSpec, error) {
	if c.none() {
		return nil, nil
	}
	if c.gbnf != "" {
		if _, err := grammar.ParseGBNF(c.gbnf); err != nil {
			return nil, apiErr(task.GrammarError(c.field, err))
		}
		spec := &engine.GrammarSpec{GBNF: c.gbnf, Lazy: c.lazy, TriggerPatterns: c.patterns, TriggerTokens: c.tokens}
		return spec, nil
	}
	schema := c.schema
	if c.anyObject {
		schema = anyObjectSchema
	}
	text, err := schemaGrammar(schema, grammar.Options{Strict: c.strict})
	if err != nil {
		return nil, apiErr(task.GrammarError(c.field, err))
	}
	spec := &engine.GrammarSpec{GBNF: text, Lazy: c.lazy, TriggerPatterns: c.patterns, TriggerTokens: c.tokens}
	if templated && !c.lazy {
		if end, ok := reasoningEnd(m, prompt); ok {
			afterReasoning(spec, end)
		}
	}
	return spec, nil
}

// afterReasoning makes spec wait for the reasoning block's end. The engine,
// like llama.cpp, feeds the text from the trigger on to the grammar, so
// the grammar starts with the end marker (optional, so that a grammar
// started right after the marker holds too) and the whitespace models put
// between reasoning and answer.
func afterReasoning(spec *engine.GrammarSpec, end reasoningMarker) {
	root := unusedRuleName(spec.GBNF, "answer-after-reasoning")
	spec.GBNF += fmt.Sprintf("%s ::= ( %s [ \\t\\n]{0,8} )? root\n", root, grammar.Literal(end.text))
	spec.Root = root
	spec.Lazy = true
	if end.single {
		spec.TriggerTokens = []engine.Token{end.token}
	} else {
		spec.TriggerPatterns = []string{regexpQuote(end.text)}
	}
}

// unusedRuleName is name, or name with a number after it, such that no
// rule of text is called that (schema property names become rule names).
func unusedRuleName(text, name string) string {
	taken := func(n string) bool {
		return strings.HasPrefix(text, n+" ::=") || strings.Contains(text, "\n"+n+" ::=")
	}
	try := name
	for i := 2; taken(try); i++ {
		try = fmt.Sprintf("%s-%d", name, i)
	}
	return try
}

// regexpQuote escapes s for a trigger pattern: the metacharacters of the
// ECMAScript and RE2 dialects alike.
func regexpQuote(s string) string {
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
// fills again with the ones in use).
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

// isNull reports an absent or null field.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// schemaValue checks that raw can be a JSON Schema (an object or a
// boolean) before the converter sees it.
func schemaValue(field string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, badParam(field, "%s: a JSON Schema is required", field)
	}
	if raw[0] != '{' && string(raw) != "true" && string(raw) != "false" {
		return nil, badParam(field, "%s: a JSON Schema must be an object or a boolean", field)
	}
	return raw, nil
}
