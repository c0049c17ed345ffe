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
// ErrUnsatisfiable; a schema past one of the bounds in limits.go (size,
// nesting, work) is a *LimitError, found before the work it bounds.
func FromJSONSchema(schema []byte, opts Options) (string, error) {
	text, _, err := convertSchema(schema, opts)
	return text, err
}

// convertSchema is FromJSONSchema, also telling the work it spent.
func convertSchema(schema []byte, opts Options) (text string, spent int, err error) {
	if len(schema) > MaxSchemaBytes {
		return "", 0, &LimitError{Limit: "JSON Schema size", Max: MaxSchemaBytes, Unit: "bytes"}
	}
	if at, ok := jsonNesting(schema, MaxSchemaNesting); !ok {
		return "", 0, &LimitError{Limit: "JSON Schema nesting depth", Max: MaxSchemaNesting, Unit: "levels of objects and arrays", At: fmt.Sprintf("byte %d", at)}
	}
	doc, err := decodeOrdered(schema)
	if err != nil {
		return "", 0, &SchemaError{Path: "", Msg: fmt.Sprintf("not JSON: %v", err)}
	}
	cv := &converter{root: doc, opts: opts, refs: map[string]dnf{}, expanding: map[string]bool{}, work: newBudget(len(schema))}
	cv.e = newEmitter(cv)
	defer func() {
		if r := recover(); r != nil {
			lp, ok := r.(limitPanic)
			if !ok {
				panic(r)
			}
			text, spent, err = "", cv.work.max-cv.work.left, lp.err
		}
	}()
	d, err := cv.refTarget("#", "")
	if err != nil {
		return "", 0, err
	}
	if len(d) == 0 {
		return "", 0, ErrUnsatisfiable
	}
	name, err := cv.e.ref("#", "")
	if err != nil {
		return "", 0, err
	}
	if err := cv.e.emitRefs(); err != nil {
		return "", 0, err
	}
	if cv.e.bodies[name] == never {
		return "", 0, ErrUnsatisfiable
	}
	text, err = checkOutput(cv.e.text(name))
	return text, cv.work.max - cv.work.left, err
}

// checkOutput refuses a converted grammar the GBNF bounds would refuse,
// naming the schema rather than a grammar the client never wrote: wide
// number bounds nest a group per digit, prefix items a group per item.
func checkOutput(text string) (string, error) {
	if len(text) > MaxGBNFBytes {
		return "", outputTooLarge()
	}
	if _, _, ok := gbnfNesting(text, MaxGBNFNesting); !ok {
		return "", &LimitError{Limit: "nesting of the grammar the JSON Schema converts to (number bounds of many digits, many prefixItems)", Max: MaxGBNFNesting, Unit: "levels"}
	}
	return text, nil
}

func outputTooLarge() *LimitError {
	return &LimitError{Limit: "size of the grammar the JSON Schema converts to", Max: MaxGBNFBytes, Unit: "bytes"}
}
