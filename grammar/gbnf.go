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
	byLHS    [][]int  // productions of each nonterminal
	names    []string // the rule's name; "" for a group or repetition
	owner    []int    // the named rule a group or repetition is part of
	nullable []bool
	root     int
}

// ruleName is nt's name; a group or repetition is named after the rule it
// is written in, as llama.cpp names them. The name is made only when asked
// for (an error message): naming each nested group after its parent, as
// this package once did, made names grow with depth and cost quadratic
// memory.
func (g *Grammar) ruleName(nt int) string {
	if g.names[nt] != "" {
		return g.names[nt]
	}
	return fmt.Sprintf("%s#%d", g.names[g.owner[nt]], nt)
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
// recursion. Token references (<[id]>, <token>) are not supported. Past
// the bounds in limits.go (size and nesting, checked before parsing;
// MaxSymbols; MaxRuleChain) the error is a *LimitError; parsing is linear
// in the text and its expanded symbols.
func ParseGBNF(text string) (*Grammar, error) {
	if len(text) > MaxGBNFBytes {
		return nil, &LimitError{Limit: "GBNF size", Max: MaxGBNFBytes, Unit: "bytes"}
	}
	if line, col, ok := gbnfNesting(text, MaxGBNFNesting); !ok {
		return nil, &LimitError{Limit: "GBNF nesting depth", Max: MaxGBNFNesting, Unit: "levels of parentheses", At: fmt.Sprintf("line %d, byte %d", line, col)}
	}
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
	nt, found, order := g.leftRecursive()
	if found {
		at := p.definedAt[nt]
		return nil, &ParseError{Line: at[0], Col: at[1], Msg: fmt.Sprintf("left recursion through rule %q (llama.cpp refuses it)", g.ruleName(nt))}
	}
	if nt, ok := g.expansionDepthWithin(order, MaxRuleChain); !ok {
		at := p.definedAt[nt]
		return nil, &LimitError{Limit: "depth of rules expanded at once (a chain of rule references, through rules that may be empty)", Max: MaxRuleChain, Unit: "rules",
			At: fmt.Sprintf("rule %q, line %d, column %d", g.ruleName(nt), at[0], at[1])}
	}
	return g, nil
}

// computeNullable marks the nonterminals that derive the empty string. It
// is a worklist: each production counts its symbols not yet known
// nullable, and a nonterminal found nullable lowers the count of the
// productions it occurs in, so each symbol is visited once (a pass-until-
// nothing-changes loop took a pass per link of a chain of rules).
func (g *Grammar) computeNullable() {
	g.nullable = make([]bool, len(g.names))
	pending := make([]int, len(g.prods))  // symbols of each production not yet known nullable
	occurs := make([][]int, len(g.names)) // productions each nonterminal occurs in, once per occurrence
	var work []int
	for i, pr := range g.prods {
		for _, s := range pr.rhs {
			if s.nt < 0 {
				pending[i] = -1 // a terminal: never nullable
				break
			}
			pending[i]++
		}
		if pending[i] < 0 {
			continue
		}
		for _, s := range pr.rhs {
			occurs[s.nt] = append(occurs[s.nt], i)
		}
		if pending[i] == 0 && !g.nullable[pr.lhs] {
			g.nullable[pr.lhs] = true
			work = append(work, pr.lhs)
		}
	}
	for len(work) > 0 {
		nt := work[len(work)-1]
		work = work[:len(work)-1]
		for _, i := range occurs[nt] {
			if pending[i]--; pending[i] == 0 {
				if lhs := g.prods[i].lhs; !g.nullable[lhs] {
					g.nullable[lhs] = true
					work = append(work, lhs)
				}
			}
		}
	}
}

// leftRecursive finds a nonterminal that can derive itself at its own left
// edge (A ⇒+ A…), looking through nullable prefixes; when there is none,
// order lists the nonterminals each after those at its left edge. The
// depth-first search keeps its own stack: a chain of rules is as deep as
// it is long.
func (g *Grammar) leftRecursive() (nt int, found bool, order []int) {
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
	type frame struct{ n, next int }
	var stack []frame
	for start := range g.names {
		if color[start] != white {
			continue
		}
		color[start] = grey
		stack = append(stack[:0], frame{n: start})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(edges[top.n]) {
				color[top.n] = black
				order = append(order, top.n)
				stack = stack[:len(stack)-1]
				continue
			}
			m := edges[top.n][top.next]
			top.next++
			switch color[m] {
			case grey:
				return m, true, nil
			case white:
				color[m] = grey
				stack = append(stack, frame{n: m})
			}
		}
	}
	return 0, false, order
}
