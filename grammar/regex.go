package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The pattern subset (ECMA-262 syntax, matched on code points):
// literals; escapes \d \D \w \W \s \S \t \n \r \f \v \0 \xHH \uHHHH and
// escaped syntax characters; `.` (any but line terminators); classes
// [...] and [^...] with ranges and the class escapes; groups (...), (?:...),
// (?<name>...); alternation; * + ? {n} {n,} {n,m}, greedy or lazy (the same
// language). ^ and $ are accepted at the start and end of the pattern or of
// a top-level alternative; a side without its anchor matches anything there,
// since JSON Schema patterns are not anchored. Refused, by name in the
// error: backreferences, lookaround, \b \B, \p{…}, \c, \u{…}, anchors
// elsewhere, flags.

type reKind int

const (
	reSet reKind = iota
	reCat
	reAlt
	reRep
	reBegin
	reEnd
)

type reNode struct {
	kind     reKind
	set      []rrange
	subs     []*reNode
	min, max int // reRep; max < 0 unbounded
}

type rrange [2]rune

type reParser struct {
	src []rune
	pos int
}

// parseRegex parses a pattern, its size and nesting bounded first (the
// parser recurses once per group): past a bound the error is a
// *LimitError.
func parseRegex(s string) (*reNode, error) {
	if len(s) > MaxPatternBytes {
		return nil, &LimitError{Limit: "pattern size", Max: MaxPatternBytes, Unit: "bytes"}
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("pattern is not valid UTF-8")
	}
	src := []rune(s)
	if patternNesting(src) > MaxPatternNesting {
		return nil, &LimitError{Limit: "pattern nesting depth", Max: MaxPatternNesting, Unit: "levels of groups"}
	}
	p := &reParser{src: src}
	n, err := p.alt()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("pattern %q: unbalanced ')' at %d", s, p.pos)
	}
	return n, nil
}

func (p *reParser) more() bool { return p.pos < len(p.src) }
func (p *reParser) peek() rune {
	if p.more() {
		return p.src[p.pos]
	}
	return 0
}

func (p *reParser) alt() (*reNode, error) {
	n := &reNode{kind: reAlt}
	for {
		c, err := p.cat()
		if err != nil {
			return nil, err
		}
		n.subs = append(n.subs, c)
		if p.peek() != '|' {
			return n, nil
		}
		p.pos++
	}
}

func (p *reParser) cat() (*reNode, error) {
	n := &reNode{kind: reCat}
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		a, err := p.atom()
		if err != nil {
			return nil, err
		}
		if a, err = p.quantified(a); err != nil {
			return nil, err
		}
		n.subs = append(n.subs, a)
	}
	return n, nil
}

func (p *reParser) quantified(a *reNode) (*reNode, error) {
	lo, hi, ok := 0, 0, true
	switch p.peek() {
	case '*':
		lo, hi = 0, -1
		p.pos++
	case '+':
		lo, hi = 1, -1
		p.pos++
	case '?':
		lo, hi = 0, 1
		p.pos++
	case '{':
		lo, hi, ok = p.braces()
	default:
		ok = false
	}
	if !ok {
		return a, nil
	}
	if a.kind == reBegin || a.kind == reEnd {
		return nil, fmt.Errorf("quantifier after an anchor")
	}
	if p.peek() == '?' {
		p.pos++ // lazy: same language
	}
	if p.peek() == '*' || p.peek() == '+' || p.peek() == '?' {
		return nil, fmt.Errorf("nothing to repeat at %d", p.pos)
	}
	return &reNode{kind: reRep, subs: []*reNode{a}, min: lo, max: hi}, nil
}

// braces reads {n}, {n,}, {n,m}; anything else leaves '{' a literal, as
// ECMA-262's web-compatibility grammar does.
func (p *reParser) braces() (lo, hi int, ok bool) {
	save := p.pos
	p.pos++
	num := func() (int, bool) {
		start := p.pos
		for p.more() && p.peek() >= '0' && p.peek() <= '9' {
			p.pos++
		}
		n, err := strconv.Atoi(string(p.src[start:p.pos]))
		return n, err == nil && n <= maxRepetition
	}
	lo, ok = num()
	hi = lo
	if ok && p.peek() == ',' {
		p.pos++
		hi = -1
		if p.peek() != '}' {
			hi, ok = num()
		}
	}
	if !ok || p.peek() != '}' || hi >= 0 && hi < lo {
		p.pos = save
		return 0, 0, false
	}
	p.pos++
	return lo, hi, true
}

func (p *reParser) atom() (*reNode, error) {
	r := p.src[p.pos]
	p.pos++
	switch r {
	case '^':
		return &reNode{kind: reBegin}, nil
	case '$':
		return &reNode{kind: reEnd}, nil
	case '.':
		return &reNode{kind: reSet, set: negate([]rrange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})}, nil
	case '[':
		set, err := p.class()
		return &reNode{kind: reSet, set: set}, err
	case '(':
		if p.peek() == '?' {
			switch {
			case p.pos+1 < len(p.src) && p.src[p.pos+1] == ':':
				p.pos += 2
			case p.pos+2 < len(p.src) && p.src[p.pos+1] == '<' && p.src[p.pos+2] != '=' && p.src[p.pos+2] != '!':
				for p.more() && p.peek() != '>' {
					p.pos++
				}
				p.pos++
			default:
				return nil, fmt.Errorf("lookaround and group flags are not supported")
			}
		}
		n, err := p.alt()
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, fmt.Errorf("missing ')'")
		}
		p.pos++
		return n, nil
	case '\\':
		set, err := p.escape(false)
		return &reNode{kind: reSet, set: set}, err
	case '*', '+', '?':
		return nil, fmt.Errorf("nothing to repeat before %q", r)
	}
	return &reNode{kind: reSet, set: []rrange{{r, r}}}, nil
}
