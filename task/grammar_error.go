package task

import (
	"errors"
	"fmt"
	"strings"

	"superfluid/engine"
	"superfluid/grammar"
)

// GrammarError words a grammar's conversion, parse or engine failure as an
// Invalid error naming field, the request field the grammar came from.
func GrammarError(field string, err error) error {
	var (
		unsup *grammar.UnsupportedError
		bad   *grammar.SchemaError
		parse *grammar.ParseError
		limit *grammar.LimitError
	)
	var e *Error
	switch {
	case errors.As(err, &limit):
		// a bound on the cost of a grammar, schema or pattern (grammar/limits.go)
		e = BadParam(field, "%s: %s", field, strings.TrimPrefix(limit.Error(), "grammar: "))
		e.Code = "grammar_limit_exceeded"
	case errors.As(err, &unsup):
		e = BadParam(field, "%s: the JSON Schema keyword %q at %s is not supported", field, unsup.Keyword, schemaPath(unsup.Path))
		if unsup.Reason != "" {
			e.Msg += ": " + unsup.Reason
		}
		e.Code = "unsupported_schema_keyword"
	case errors.As(err, &bad):
		e = BadParam(field, "%s: invalid JSON Schema at %s", field, schemaPath(bad.Path))
		if bad.Keyword != "" {
			e.Msg += fmt.Sprintf(" (keyword %q)", bad.Keyword)
		}
		e.Msg += ": " + bad.Msg
		e.Code = "invalid_schema"
	case errors.Is(err, grammar.ErrUnsatisfiable):
		e = BadParam(field, "%s: the schema admits no value, so nothing could be generated", field)
		e.Code = "invalid_schema"
	case errors.As(err, &parse):
		e = BadParam(field, "%s: the grammar does not parse: line %d, column %d: %s", field, parse.Line, parse.Col, parse.Msg)
		e.Code = "invalid_grammar"
	case errors.Is(err, engine.ErrGrammar):
		e = BadParam(field, "%s: the grammar cannot be used: %v", field, err)
		e.Code = "invalid_grammar"
	default:
		e = BadParam(field, "%s: %v", field, err)
	}
	return e
}

// schemaPath is a JSON pointer as a fragment: "#" for the root.
func schemaPath(p string) string { return "#" + p }
