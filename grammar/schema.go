package grammar

import "fmt"

// Options tune the conversion.
type Options struct {
	// Strict makes an object schema that declares properties (properties
	// or required) admit no others unless it states additionalProperties,
	// as OpenAI's strict structured outputs do. Without it a missing
	// additionalProperties admits any further property, as JSON Schema says.
	Strict bool
	// CompactWhitespace admits no whitespace between JSON tokens. Otherwise
	// a single space, or a newline and up to 20 spaces or tabs, may follow
	// each token: enough to pretty-print, too little to loop on.
	CompactWhitespace bool
	// InlineWhitespace admits at most one space between JSON tokens, as
	// models write a call's arguments on one line: the pretty-printing
	// newlines and indents are left out, so that a random or unsure model
	// cannot spend its tokens on them.
	InlineWhitespace bool
}

// FromJSONSchema converts a JSON Schema (draft 2020-12 keywords; see the
// package documentation for what is supported) into a GBNF grammar in
// llama.cpp's dialect whose root rule matches exactly the JSON texts, as
// this package spells them, of the values the schema admits.
//
// A keyword it cannot state exactly is an *UnsupportedError naming it; a
// malformed schema is a *SchemaError; a schema nothing satisfies is
// ErrUnsatisfiable.
func FromJSONSchema(schema []byte, opts Options) (string, error) {
	doc, err := decodeOrdered(schema)
	if err != nil {
		return "", &SchemaError{Path: "", Msg: fmt.Sprintf("not JSON: %v", err)}
	}
	cv := &converter{root: doc, opts: opts, refs: map[string]dnf{}, expanding: map[string]bool{}}
	cv.e = newEmitter(cv)
	d, err := cv.refTarget("#", "")
	if err != nil {
		return "", err
	}
	if len(d) == 0 {
		return "", ErrUnsatisfiable
	}
	name, err := cv.e.ref("#", "")
	if err != nil {
		return "", err
	}
	if cv.e.bodies[name] == never {
		return "", ErrUnsatisfiable
	}
	return cv.e.text(name), nil
}
