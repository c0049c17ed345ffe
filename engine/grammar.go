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

// GrammarID names a compiled grammar to Admit; 0 is none.
type GrammarID uint32

// Grammars is an Engine that constrains lanes with grammars. Both methods
// are safe from any goroutine, also while a tick runs: compiling (parsing,
// building the grammar's start state) happens there, never in a tick.
type Grammars interface {
	// AcquireGrammar returns the id of g compiled, compiling it unless an
	// identical spec is in the cache, and holds a reference to it: the id
	// stays valid for admissions until ReleaseGrammar. A grammar that does
	// not compile is an error satisfying errors.Is(err, ErrGrammar).
	AcquireGrammar(g *GrammarSpec) (GrammarID, error)
	// ReleaseGrammar drops a reference AcquireGrammar returned. An
	// unreferenced grammar stays cached (least recently used first out).
	ReleaseGrammar(id GrammarID)
}
