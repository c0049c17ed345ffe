package engine

// GrammarSpec is a grammar a lane's output must follow, in llama.cpp's GBNF
// dialect. A lazy grammar leaves the output free until a trigger appears
// (a reasoning block's end, a tool-call marker) and constrains it from
// there on.
type GrammarSpec struct {
	GBNF string
	// Root is the start rule; "" means "root".
	Root string
	// Lazy: constrained only from the first trigger on.
	Lazy bool
	// TriggerPatterns are regular expressions matched against the text
	// generated so far; the constraint starts at the match.
	TriggerPatterns []string
	// TriggerTokens start the constraint when sampled.
	TriggerTokens []Token
}
