package grammar

import "fmt"

// Bounds on what a client's grammar, schema or pattern may ask for. Each
// is checked by a scan of the text before it is parsed, so an input past
// one costs a pass over its bytes and nothing else; below them parsing and
// converting take time and memory in proportion to the input (the work
// budget below holds the converter to that). They sit well above what
// real inputs need: tool and response schemas nest under 20 levels
// (OpenAI's strict mode allows 10; a schema level is two JSON levels, an
// object and its "properties"), patterns under 10 groups,
// and hand-written or converted GBNF under 30 parentheses.
const (
	// MaxGBNFBytes is the largest GBNF text, as the engine takes it.
	MaxGBNFBytes = 1 << 20
	// MaxGBNFNesting bounds nested parentheses in GBNF: llama.cpp's parser
	// recurses once per group, and so did ours.
	MaxGBNFNesting = 128
	// MaxRuleChain bounds how many rules llama.cpp's matcher expands
	// within one another before it reaches a character: it recurses once
	// per rule, copying its stack each time, so a chain of 80,000 rules
	// overflowed the native stack and killed the server (see
	// Grammar.expansionDepthWithin); this is a tenth of that. Grammars
	// converted from schemas reach 10 at 128 levels of nesting, and twice
	// the count of an object's optional properties (4,005 for 2,000).
	MaxRuleChain = 8192
	// MaxSchemaBytes is the largest JSON Schema text. Tool definitions
	// are converted as one schema and are mostly descriptions, which cost
	// nothing to convert: this is four times the largest tool sets agents
	// send.
	MaxSchemaBytes = 4 << 20
	// MaxSchemaNesting bounds the nesting of objects and arrays in a
	// schema's JSON text (about 128 schema levels).
	MaxSchemaNesting = 256
	// MaxPatternBytes and MaxPatternNesting bound a pattern keyword.
	MaxPatternBytes   = 1 << 16
	MaxPatternNesting = 64
	// maxExpandDepth bounds $refs expanded inside one another (a $ref
	// merged with siblings or through allOf whose target does the same).
	maxExpandDepth = 64
)

// The converter's work budget, in units of about a byte allocated or a
// step taken: schema objects read and alternatives merged (conjCost
// each), enum values compared, bytes of grammar and of JSON pointer
// written. Merging combinators can multiply work (allOf over $refs whose
// targets meet again, property by property) in a way no pre-scan sees;
// the budget turns that into a refusal after work, and memory, in
// proportion to the input: workBase + workPerByte × its size, at most
// workMax (the base covers writing a grammar of MaxGBNFBytes). Real
// schemas spend a fraction of it: TestWorkBudgetHeadroom holds the JSON
// Schema Test Suite and large tool and response schemas to a quarter.
const (
	workPerByte = 64
	workBase    = 16 << 20
	workMax     = 96 << 20
	conjCost    = 256 // a conjunction's size in memory
)

// LimitError is an input past one of the bounds above.
type LimitError struct {
	Limit string // what is bounded, e.g. "GBNF nesting depth"
	Max   int    // the bound
	Unit  string // its unit, e.g. "levels"
	At    string // where it was passed: "line 1, column 140", "byte 512", a JSON pointer; "" for the whole input
}

func (e *LimitError) Error() string {
	msg := fmt.Sprintf("grammar: %s exceeds the limit of %d %s", e.Limit, e.Max, e.Unit)
	if e.At != "" {
		msg += " (at " + e.At + ")"
	}
	return msg
}

// gbnfNesting finds the first parenthesis nested deeper than limit outside
// literals, character classes and comments; ok is false there, with its
// 1-based line and column (in bytes).
func gbnfNesting(s string, limit int) (line, col int, ok bool) {
	depth, line, lineStart := 0, 1, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			for i++; i < len(s) && s[i] != end; i++ {
				if s[i] == '\\' {
					i++
				} else if s[i] == '\n' {
					line, lineStart = line+1, i+1
				}
			}
		case '#':
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
		case '\n':
			line, lineStart = line+1, i+1
		case '(':
			if depth++; depth > limit {
				return line, i - lineStart + 1, false
			}
		case ')':
			depth = max(depth-1, 0)
		}
	}
	return 0, 0, true
}

// jsonNesting finds the first object or array nested deeper than limit in
// a JSON text (strings skipped); ok is false there, with its byte offset.
func jsonNesting(s []byte, limit int) (at int, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > limit {
				return i, false
			}
		case '}', ']':
			depth = max(depth-1, 0)
		}
	}
	return 0, true
}

// patternNesting is the deepest group nesting of a pattern, counting '('
// outside character classes and escapes.
func patternNesting(src []rune) int {
	depth, deepest := 0, 0
	inClass := false
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\\':
			i++
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '(':
			depth++
			deepest = max(deepest, depth)
		case c == ')':
			depth = max(depth-1, 0)
		}
	}
	return deepest
}

// budget is the converter's work budget; spending past it panics with a
// limitPanic, which FromJSONSchema recovers into its *LimitError. A panic
// keeps the budget out of the signature of every function that spends it;
// it never leaves the package.
type budget struct {
	left, max int
}

// limitPanic carries a *LimitError from deep in the converter to
// FromJSONSchema.
type limitPanic struct{ err *LimitError }

func newBudget(inputBytes int) *budget {
	n := min(workBase+workPerByte*inputBytes, workMax)
	return &budget{left: n, max: n}
}

func (b *budget) spend(n int) {
	b.left -= n
	if b.left < 0 {
		panic(limitPanic{&LimitError{Limit: "work converting the JSON Schema (combinators and references multiplied out, key tries, grammar written)", Max: b.max, Unit: "units"}})
	}
}
