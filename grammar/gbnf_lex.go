package grammar

import "unicode/utf8"

// char reads one code point of a literal or class, decoding the escapes
// llama.cpp's parse_char knows.
func (p *gbnfParser) char() (rune, error) {
	if p.eof() {
		return 0, p.errf("unexpected end of grammar")
	}
	if p.peek() != '\\' {
		return p.advance(), nil
	}
	at := p.mark()
	p.advance()
	if p.eof() {
		return 0, p.errf("unexpected end of grammar after '\\'")
	}
	switch e := p.advance(); e {
	case 'x':
		return p.hex(2)
	case 'u':
		return p.hex(4)
	case 'U':
		return p.hex(8)
	case 't':
		return '\t', nil
	case 'r':
		return '\r', nil
	case 'n':
		return '\n', nil
	case '\\', '"', '[', ']', '-':
		return e, nil
	default:
		return 0, at.errf("unknown escape \\%c", e)
	}
}

func (p *gbnfParser) hex(n int) (rune, error) {
	var v rune
	for i := 0; i < n; i++ {
		r := p.peek()
		var d rune
		switch {
		case r >= '0' && r <= '9':
			d = r - '0'
		case r >= 'a' && r <= 'f':
			d = r - 'a' + 10
		case r >= 'A' && r <= 'F':
			d = r - 'A' + 10
		default:
			return 0, p.errf("expecting %d hex digits", n)
		}
		p.advance()
		v = v<<4 | d
	}
	if v > utf8.MaxRune {
		return 0, p.errf("code point %#x beyond Unicode", v)
	}
	return v, nil
}

func (p *gbnfParser) literal() ([]rune, error) {
	p.advance() // opening quote
	var out []rune
	for {
		if p.eof() {
			return nil, p.errf("unterminated string literal")
		}
		if p.peek() == '"' {
			p.advance()
			return out, nil
		}
		c, err := p.char()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

func (p *gbnfParser) class() (*charClass, error) {
	p.advance() // '['
	cls := &charClass{}
	if p.peek() == '^' {
		p.advance()
		cls.negated = true
	}
	for {
		if p.eof() {
			return nil, p.errf("unterminated character class")
		}
		if p.peek() == ']' {
			p.advance()
			return cls, nil
		}
		at := p.mark()
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.peek() == '-' && p.peekAt(1) != ']' && p.peekAt(1) != 0 {
			p.advance()
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, at.errf("character range %q-%q is reversed", lo, hi)
			}
		}
		cls.ranges = append(cls.ranges, [2]rune{lo, hi})
	}
}
