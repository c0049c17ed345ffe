package engine

import (
	"fmt"
	"regexp/syntax"
	"strings"

	"superfluid/grammar"
)

// Bounds on what a grammar spec may hold. llama.cpp's parser recurses once
// per nested group and its matcher once per stacked rule, so depth is
// what could overflow a stack: grammar.ParseGBNF bounds the size and the
// nesting of the text (grammar.MaxGBNFBytes, grammar.MaxGBNFNesting)
// before it parses. libstdc++'s regex compiles repetitions by copying
// states, so a pattern's expanded size is what could exhaust memory or
// make each token's trigger search slow.
const (
	MaxGrammarBytes    = grammar.MaxGBNFBytes
	maxTriggerPatterns = 16
	maxTriggerTokens   = 256
	maxPatternBytes    = 256
	maxPatternSize     = 512 // nodes after expanding counted repetitions
)

func grammarErr(format string, args ...any) error {
	return &Error{Status: StatusGrammar, Op: "grammar", Msg: fmt.Sprintf(format, args...)}
}

// CheckGrammar refuses a spec the native engine must not see: text
// grammar.ParseGBNF refuses (the dialect and refusals of llama.cpp's parser:
// undefined rules, left recursion, repetition counts above 2000; its
// bounds on size, nesting and expanded symbols), and anything past the
// bounds above. Its errors satisfy errors.Is(err,
// ErrGrammar). Engines call it before compiling.
func CheckGrammar(g *GrammarSpec) error {
	switch {
	case g.GBNF == "":
		return grammarErr("empty grammar")
	case len(g.GBNF) > MaxGrammarBytes:
		return grammarErr("grammar of %d bytes exceeds %d", len(g.GBNF), MaxGrammarBytes)
	case strings.IndexByte(g.GBNF, 0) >= 0 || strings.IndexByte(g.Root, 0) >= 0:
		return grammarErr("grammar text holds a NUL byte")
	case len(g.TriggerPatterns) > maxTriggerPatterns:
		return grammarErr("%d trigger patterns exceed %d", len(g.TriggerPatterns), maxTriggerPatterns)
	case len(g.TriggerTokens) > maxTriggerTokens:
		return grammarErr("%d trigger tokens exceed %d", len(g.TriggerTokens), maxTriggerTokens)
	case !g.Lazy && len(g.TriggerPatterns)+len(g.TriggerTokens) > 0:
		return grammarErr("triggers on a grammar that is not lazy")
	case g.Lazy && len(g.TriggerPatterns)+len(g.TriggerTokens) == 0:
		return grammarErr("a lazy grammar without a trigger")
	}
	// ParseGBNF bounds the nesting first and the expanded size
	// (grammar.MaxSymbols), which is what llama.cpp compiles, caches and
	// copies into each lane.
	if _, err := grammar.ParseGBNF(g.GBNF); err != nil {
		return grammarErr("%v", err)
	}
	if g.Root != "" && !definesRule(g.GBNF, g.Root) {
		return grammarErr("no rule named %q to start from", g.Root)
	}
	for i, p := range g.TriggerPatterns {
		if err := checkPattern(p); err != nil {
			return grammarErr("trigger pattern %d: %v", i, err)
		}
	}
	return nil
}

// definesRule reports whether a parsed grammar defines rule name: a rule
// starts a line (after blanks) with its name and ::=.
func definesRule(text, name string) bool {
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), name)
		if ok && strings.HasPrefix(strings.TrimLeft(rest, " \t"), "::=") {
			return true
		}
	}
	return false
}

// checkPattern admits a trigger pattern in the common ground of RE2 (which
// parses it here) and ECMAScript (which the engine runs): no backreference
// or lookaround, and a bounded size once repetitions are expanded.
func checkPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty")
	}
	if len(p) > maxPatternBytes || strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("longer than %d bytes or holding a NUL byte", maxPatternBytes)
	}
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return err
	}
	if n := patternSize(re); n > maxPatternSize {
		return fmt.Errorf("expands to %d nodes, more than %d", n, maxPatternSize)
	}
	return nil
}

func patternSize(re *syntax.Regexp) int {
	n := 1
	for _, s := range re.Sub {
		n += patternSize(s)
	}
	if re.Op == syntax.OpRepeat {
		k := max(re.Max, re.Min, 1)
		n = min(n*k, maxPatternSize+1)
	}
	return n
}
