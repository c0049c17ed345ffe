package grammar

import (
	"fmt"
	"unicode/utf8"
)

// Grammar is a parsed GBNF grammar lowered to a plain context-free grammar
// over Unicode code points: groups and repetitions become rules of their own,
// the way llama.cpp lowers them.
type Grammar struct {
	prods    []production
	byLHS    [][]int // productions of each nonterminal
	names    []string
	nullable []bool
	root     int
}

// Size is the number of symbols in the lowered grammar: what llama.cpp
// allocates and walks for it, since it lowers repetitions the same way (a
// bounded repetition of n becomes n copies of the repeated element).
func (g *Grammar) Size() int {
	n := 0
	for _, p := range g.prods {
		n += len(p.rhs) + 1
	}
	return n
}

type production struct {
	lhs int
	rhs []symbol
}

// symbol is a nonterminal (nt ≥ 0) or a terminal: one code point in cls.
type symbol struct {
	nt  int
	cls *charClass
}

// charClass is a set of code points: ranges, inverted when negated.
type charClass struct {
	ranges  [][2]rune
	negated bool
}

func (c *charClass) matches(r rune) bool {
	in := false
	for _, rg := range c.ranges {
		if rg[0] <= r && r <= rg[1] {
			in = true
			break
		}
	}
	return in != c.negated
}

// ParseError is a grammar text that is not GBNF; Line and Col are 1-based,
// Col counts code points.
type ParseError struct {
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// ParseGBNF parses llama.cpp's GBNF dialect: rules `name ::= alternatives`,
// names of [a-zA-Z0-9-], string literals and character classes with the
// escapes \x.. \u.... \U........ \t \r \n \\ \" \[ \] \-, negated classes
// [^...], `.`, grouping, alternation, and the repetitions * + ? {m} {m,}
// {m,n}; `#` comments; newlines end a rule except inside parentheses. The
// root rule is "root". Like llama.cpp it refuses undefined rules and left
// recursion. Token references (<[id]>, <token>) are not supported.
func ParseGBNF(text string) (*Grammar, error) {
	if !utf8.ValidString(text) {
		return nil, &ParseError{Line: 1, Col: 1, Msg: "grammar text is not valid UTF-8"}
	}
	p := &gbnfParser{src: []rune(text), line: 1, col: 1, g: &Grammar{}, ids: map[string]int{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	g := p.g
	g.byLHS = make([][]int, len(g.names))
	for i, pr := range g.prods {
		g.byLHS[pr.lhs] = append(g.byLHS[pr.lhs], i)
	}
	for name, id := range p.ids {
		if !p.defined[id] {
			at := p.firstUse[id]
			return nil, &ParseError{Line: at[0], Col: at[1], Msg: fmt.Sprintf("undefined rule %q", name)}
		}
	}
	root, ok := p.ids["root"]
	if !ok {
		return nil, &ParseError{Line: 1, Col: 1, Msg: `no rule named "root"`}
	}
	g.root = root
	if n := g.Size(); n > MaxSymbols {
		return nil, &ParseError{Line: 1, Col: 1, Msg: fmt.Sprintf("the grammar expands to %d symbols, more than %d", n, MaxSymbols)}
	}
	g.computeNullable()
	if nt, ok := g.leftRecursive(); ok {
		at := p.definedAt[nt]
		return nil, &ParseError{Line: at[0], Col: at[1], Msg: fmt.Sprintf("left recursion through rule %q (llama.cpp refuses it)", g.names[nt])}
	}
	return g, nil
}

func (g *Grammar) computeNullable() {
	g.nullable = make([]bool, len(g.names))
	for changed := true; changed; {
		changed = false
		for _, pr := range g.prods {
			if g.nullable[pr.lhs] {
				continue
			}
			all := true
			for _, s := range pr.rhs {
				if s.nt < 0 || !g.nullable[s.nt] {
					all = false
					break
				}
			}
			if all {
				g.nullable[pr.lhs] = true
				changed = true
			}
		}
	}
}

// leftRecursive finds a nonterminal that can derive itself at its own left
// edge (A ⇒+ A…), looking through nullable prefixes.
func (g *Grammar) leftRecursive() (int, bool) {
	edges := make([][]int, len(g.names))
	for _, pr := range g.prods {
		for _, s := range pr.rhs {
			if s.nt < 0 {
				break
			}
			edges[pr.lhs] = append(edges[pr.lhs], s.nt)
			if !g.nullable[s.nt] {
				break
			}
		}
	}
	const white, grey, black = 0, 1, 2
	color := make([]int, len(g.names))
	var found = -1
	var visit func(n int) bool
	visit = func(n int) bool {
		color[n] = grey
		for _, m := range edges[n] {
			if color[m] == grey {
				found = m
				return true
			}
			if color[m] == white && visit(m) {
				return true
			}
		}
		color[n] = black
		return false
	}
	for n := range g.names {
		if color[n] == white && visit(n) {
			return found, true
		}
	}
	return 0, false
}
