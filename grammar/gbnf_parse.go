package grammar

import "fmt"

// maxRepetition is llama.cpp's bound on a repetition count
// (MAX_REPETITION_THRESHOLD); a larger one is refused here as there.
const maxRepetition = 2000

// MaxSymbols bounds a grammar's size with its repetitions expanded
// (Grammar.Size): what llama.cpp allocates for it and walks per token. A
// megabyte of text can ask for hundreds of millions of symbols through a
// few counts; no output format needs more than this.
const MaxSymbols = 1 << 18

type gbnfParser struct {
	src       []rune
	pos       int
	line, col int
	g         *Grammar
	ids       map[string]int
	defined   map[int]bool
	firstUse  map[int][2]int
	definedAt map[int][2]int
	symbols   int // an upper bound on the symbols expanded so far
	rule      int // the named rule being parsed: groups are part of it
	depth     int // groups open
}

func (p *gbnfParser) errf(format string, args ...any) error {
	return &ParseError{Line: p.line, Col: p.col, Msg: fmt.Sprintf(format, args...)}
}

// mark is a position to report an error at the start of what it is about.
type mark struct{ line, col int }

func (p *gbnfParser) mark() mark { return mark{p.line, p.col} }

func (m mark) errf(format string, args ...any) error {
	return &ParseError{Line: m.line, Col: m.col, Msg: fmt.Sprintf(format, args...)}
}

func (p *gbnfParser) eof() bool { return p.pos >= len(p.src) }

func (p *gbnfParser) peek() rune {
	if p.eof() {
		return 0
	}
	return p.src[p.pos]
}

func (p *gbnfParser) peekAt(k int) rune {
	if p.pos+k >= len(p.src) {
		return 0
	}
	return p.src[p.pos+k]
}

func (p *gbnfParser) advance() rune {
	r := p.src[p.pos]
	p.pos++
	if r == '\n' {
		p.line++
		p.col = 1
	} else {
		p.col++
	}
	return r
}

// space skips blanks and comments; newlines only where newlineOK.
func (p *gbnfParser) space(newlineOK bool) {
	for !p.eof() {
		switch r := p.peek(); {
		case r == ' ' || r == '\t':
			p.advance()
		case r == '#':
			for !p.eof() && p.peek() != '\n' && p.peek() != '\r' {
				p.advance()
			}
		case newlineOK && (r == '\n' || r == '\r'):
			p.advance()
		default:
			return
		}
	}
}

func isWordChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
}

func (p *gbnfParser) symbolID(name string) int {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := len(p.g.names)
	p.g.names = append(p.g.names, name)
	p.g.owner = append(p.g.owner, id)
	p.ids[name] = id
	return id
}

// fresh makes a nonterminal for a group or repetition inside the rule
// being parsed.
func (p *gbnfParser) fresh() int {
	id := len(p.g.names)
	p.g.names = append(p.g.names, "")
	p.g.owner = append(p.g.owner, p.rule)
	p.definedAt[id] = [2]int{p.line, p.col}
	return id
}

func (p *gbnfParser) parse() error {
	p.defined = map[int]bool{}
	p.firstUse = map[int][2]int{}
	p.definedAt = map[int][2]int{}
	p.space(true)
	for !p.eof() {
		if err := p.parseRule(); err != nil {
			return err
		}
	}
	return nil
}

func (p *gbnfParser) name() (string, error) {
	start := p.pos
	for !p.eof() && isWordChar(p.peek()) {
		p.advance()
	}
	if p.pos == start {
		return "", p.errf("expecting a rule name")
	}
	return string(p.src[start:p.pos]), nil
}

func (p *gbnfParser) parseRule() error {
	line, col := p.line, p.col
	name, err := p.name()
	if err != nil {
		return err
	}
	p.space(false)
	if p.peek() != ':' || p.peekAt(1) != ':' || p.peekAt(2) != '=' {
		return p.errf("expecting ::= after rule name %q", name)
	}
	p.advance()
	p.advance()
	p.advance()
	p.space(true)
	id := p.symbolID(name)
	if p.defined[id] {
		return &ParseError{Line: line, Col: col, Msg: fmt.Sprintf("rule %q defined twice", name)}
	}
	p.defined[id] = true
	p.definedAt[id] = [2]int{line, col}
	p.rule = id
	if err := p.alternates(id, false); err != nil {
		return err
	}
	switch {
	case p.peek() == '\r':
		p.advance()
		if p.peek() == '\n' {
			p.advance()
		}
	case p.peek() == '\n':
		p.advance()
	case !p.eof():
		return p.errf("expecting newline or end of grammar, found %q", p.peek())
	}
	p.space(true)
	return nil
}

func (p *gbnfParser) alternates(lhs int, nested bool) error {
	for {
		rhs, err := p.sequence(nested)
		if err != nil {
			return err
		}
		p.g.prods = append(p.g.prods, production{lhs: lhs, rhs: rhs})
		if p.peek() != '|' {
			return nil
		}
		p.advance()
		p.space(true)
	}
}
