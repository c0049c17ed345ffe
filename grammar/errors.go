package grammar

import (
	"errors"
	"fmt"
)

// UnsupportedError is a schema keyword (or a use of one) the converter does
// not turn into a grammar. It is refused rather than ignored, because a
// grammar that skips a keyword lets through values the schema forbids.
type UnsupportedError struct {
	Keyword string // the keyword, e.g. "patternProperties"
	Path    string // JSON pointer of the schema holding it ("" is the root)
	Reason  string // why, when the keyword is supported in other uses
}

func (e *UnsupportedError) Error() string {
	msg := fmt.Sprintf("grammar: unsupported JSON Schema keyword %q at %q", e.Keyword, pathOrRoot(e.Path))
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// SchemaError is a schema that is not valid JSON Schema: a keyword whose
// value has the wrong shape, a $ref that points nowhere.
type SchemaError struct {
	Keyword string
	Path    string
	Msg     string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("grammar: invalid schema: %q at %q: %s", e.Keyword, pathOrRoot(e.Path), e.Msg)
}

// ErrUnsatisfiable is a schema no JSON value satisfies (false, or
// contradictory constraints): there is no grammar to sample from.
var ErrUnsatisfiable = errors.New("grammar: the schema admits no value")

func pathOrRoot(p string) string {
	if p == "" {
		return "#"
	}
	return "#" + p
}

func unsupported(path, kw, reason string, args ...any) error {
	return &UnsupportedError{Keyword: kw, Path: path, Reason: fmt.Sprintf(reason, args...)}
}

func invalid(path, kw, msg string, args ...any) error {
	return &SchemaError{Keyword: kw, Path: path, Msg: fmt.Sprintf(msg, args...)}
}
