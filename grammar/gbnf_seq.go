package grammar

import "strconv"

// sequence parses elements up to '|', ')' or the end of the rule; last
// remembers where the latest element starts so a repetition applies to it.
func (p *gbnfParser) sequence(nested bool) ([]symbol, error) {
	var rhs []symbol
	last := -1
	for !p.eof() {
		r := p.peek()
		switch {
		case r == '"':
			last = len(rhs)
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			for _, c := range lit {
				rhs = append(rhs, symbol{nt: -1, cls: &charClass{ranges: [][2]rune{{c, c}}}})
			}
			if len(lit) == 0 {
				last = -1 // an empty literal is nothing to repeat
			}
		case r == '[':
			cls, err := p.class()
			if err != nil {
				return nil, err
			}
			last = len(rhs)
			rhs = append(rhs, symbol{nt: -1, cls: cls})
		case r == '.':
			p.advance()
			last = len(rhs)
			rhs = append(rhs, symbol{nt: -1, cls: &charClass{negated: true}})
		case isWordChar(r):
			line, col := p.line, p.col
			name, _ := p.name()
			id := p.symbolID(name)
			if _, seen := p.firstUse[id]; !seen {
				p.firstUse[id] = [2]int{line, col}
			}
			last = len(rhs)
			rhs = append(rhs, symbol{nt: id})
		case r == '(':
			// ParseGBNF bounded the nesting before parsing; this is the
			// recursion's own guard should the two ever disagree.
			if p.depth >= MaxGBNFNesting {
				return nil, p.errf("groups nested deeper than %d", MaxGBNFNesting)
			}
			p.advance()
			p.space(true)
			sub := p.fresh()
			p.defined[sub] = true
			p.depth++
			err := p.alternates(sub, true)
			p.depth--
			if err != nil {
				return nil, err
			}
			if p.peek() != ')' {
				return nil, p.errf("expecting ')'")
			}
			p.advance()
			last = len(rhs)
			rhs = append(rhs, symbol{nt: sub})
		case r == '*' || r == '+' || r == '?' || r == '{':
			if last < 0 {
				return nil, p.errf("repetition %q with nothing before it", r)
			}
			at := p.mark()
			lo, hi, err := p.repetition()
			if err != nil {
				return nil, err
			}
			// A bounded repetition lowers to hi copies of its element:
			// refuse before expanding what would pass MaxSymbols.
			p.symbols += (len(rhs) - last + 1) * max(lo, hi, 1)
			if p.symbols > MaxSymbols {
				return nil, at.errf("the grammar expands to more than %d symbols", MaxSymbols)
			}
			rhs = p.repeat(rhs, last, lo, hi)
			last = -1
		case r == '<' || r == '!':
			return nil, p.errf("token references are not supported")
		default:
			return rhs, nil
		}
		p.space(nested)
	}
	return rhs, nil
}

// repetition parses * + ? {m} {m,} {m,n}; hi < 0 is unbounded.
func (p *gbnfParser) repetition() (lo, hi int, err error) {
	at := p.mark()
	switch p.advance() {
	case '*':
		return 0, -1, nil
	case '+':
		return 1, -1, nil
	case '?':
		return 0, 1, nil
	}
	p.space(false)
	if lo, err = p.integer(); err != nil {
		return 0, 0, err
	}
	p.space(false)
	hi = lo
	if p.peek() == ',' {
		p.advance()
		p.space(false)
		hi = -1
		if r := p.peek(); r >= '0' && r <= '9' {
			if hi, err = p.integer(); err != nil {
				return 0, 0, err
			}
			p.space(false)
		}
	}
	if p.peek() != '}' {
		return 0, 0, p.errf("expecting '}'")
	}
	p.advance()
	if lo > maxRepetition || hi > maxRepetition {
		return 0, 0, at.errf("repetition count above %d", maxRepetition)
	}
	if hi >= 0 && hi < lo {
		return 0, 0, at.errf("repetition {%d,%d}: maximum below minimum", lo, hi)
	}
	return lo, hi, nil
}

func (p *gbnfParser) integer() (int, error) {
	start := p.pos
	for r := p.peek(); r >= '0' && r <= '9'; r = p.peek() {
		p.advance()
	}
	if p.pos == start {
		return 0, p.errf("expecting an integer")
	}
	n, err := strconv.Atoi(string(p.src[start:p.pos]))
	if err != nil || n > maxRepetition {
		return maxRepetition + 1, nil
	}
	return n, nil
}

// repeat rewrites rhs[last:] as a repetition {lo,hi}: lo copies, then a
// right-recursive tail (unbounded) or a chain of optional rules.
func (p *gbnfParser) repeat(rhs []symbol, last, lo, hi int) []symbol {
	item := append([]symbol(nil), rhs[last:]...)
	rhs = rhs[:last]
	for i := 0; i < lo; i++ {
		rhs = append(rhs, item...)
	}
	if hi < 0 {
		star := p.fresh()
		p.defined[star] = true
		body := append(append([]symbol(nil), item...), symbol{nt: star})
		p.g.prods = append(p.g.prods, production{lhs: star, rhs: body}, production{lhs: star})
		return append(rhs, symbol{nt: star})
	}
	next := -1
	for i := 0; i < hi-lo; i++ {
		opt := p.fresh()
		p.defined[opt] = true
		body := append([]symbol(nil), item...)
		if next >= 0 {
			body = append(body, symbol{nt: next})
		}
		p.g.prods = append(p.g.prods, production{lhs: opt, rhs: body}, production{lhs: opt})
		next = opt
	}
	if next >= 0 {
		rhs = append(rhs, symbol{nt: next})
	}
	return rhs
}
