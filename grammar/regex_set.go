package grammar

import (
	"fmt"
	"sort"
	"strconv"
)

var (
	digitSet = []rrange{{'0', '9'}}
	wordSet  = []rrange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	spaceSet = []rrange{{'\t', '\r'}, {' ', ' '}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a},
		{0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}}
)

// class reads a character class after its '['.
func (p *reParser) class() ([]rrange, error) {
	neg := false
	if p.peek() == '^' {
		neg = true
		p.pos++
	}
	var set []rrange
	for {
		if !p.more() {
			return nil, fmt.Errorf("unterminated character class")
		}
		if p.peek() == ']' {
			p.pos++
			break
		}
		lo, loSet, err := p.classAtom()
		if err != nil {
			return nil, err
		}
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' && loSet == nil {
			p.pos++
			hi, hiSet, err := p.classAtom()
			if err != nil {
				return nil, err
			}
			if hiSet != nil || hi < lo {
				return nil, fmt.Errorf("bad character range in class")
			}
			set = append(set, rrange{lo, hi})
			continue
		}
		if loSet != nil {
			set = append(set, loSet...)
		} else {
			set = append(set, rrange{lo, lo})
		}
	}
	set = normalizeSet(set)
	if neg {
		set = negate(set)
	}
	return set, nil
}

// classAtom is one character of a class, or a class escape's whole set.
func (p *reParser) classAtom() (rune, []rrange, error) {
	r := p.src[p.pos]
	p.pos++
	if r != '\\' {
		return r, nil, nil
	}
	set, err := p.escape(true)
	if err != nil {
		return 0, nil, err
	}
	if len(set) == 1 && set[0][0] == set[0][1] {
		return set[0][0], nil, nil
	}
	return 0, set, nil
}

// escape reads what follows a backslash.
func (p *reParser) escape(inClass bool) ([]rrange, error) {
	if !p.more() {
		return nil, fmt.Errorf("pattern ends in a backslash")
	}
	r := p.src[p.pos]
	p.pos++
	one := func(c rune) ([]rrange, error) { return []rrange{{c, c}}, nil }
	switch r {
	case 'd':
		return digitSet, nil
	case 'D':
		return negate(digitSet), nil
	case 'w':
		return wordSet, nil
	case 'W':
		return negate(wordSet), nil
	case 's':
		return spaceSet, nil
	case 'S':
		return negate(spaceSet), nil
	case 't':
		return one('\t')
	case 'n':
		return one('\n')
	case 'r':
		return one('\r')
	case 'f':
		return one('\f')
	case 'v':
		return one('\v')
	case 'b':
		if inClass {
			return one('\b')
		}
		return nil, fmt.Errorf(`word boundary \b is not supported`)
	case '0':
		if c := p.peek(); c >= '0' && c <= '9' {
			return nil, fmt.Errorf(`octal escapes are not supported`)
		}
		return one(0)
	case 'x', 'u':
		n := 2
		if r == 'u' {
			n = 4
		}
		if p.peek() == '{' || p.pos+n > len(p.src) {
			return nil, fmt.Errorf(`\%c needs exactly %d hex digits (\u{…} is not supported)`, r, n)
		}
		v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil {
			return nil, fmt.Errorf(`bad \%c escape`, r)
		}
		p.pos += n
		return one(rune(v))
	}
	switch {
	case r >= '1' && r <= '9':
		return nil, fmt.Errorf("backreferences are not supported")
	case r == 'p' || r == 'P':
		return nil, fmt.Errorf(`Unicode property escapes \%c{…} are not supported`, r)
	case r == 'B' || r == 'c' || r == 'k':
		return nil, fmt.Errorf(`\%c is not supported`, r)
	case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
		return nil, fmt.Errorf(`unknown escape \%c`, r)
	}
	return one(r) // an escaped syntax character stands for itself
}

// normalizeSet sorts and merges ranges.
func normalizeSet(set []rrange) []rrange {
	s := append([]rrange(nil), set...)
	sort.Slice(s, func(i, j int) bool { return s[i][0] < s[j][0] })
	var out []rrange
	for _, r := range s {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// negate is the complement among Unicode scalar values (no surrogates).
func negate(set []rrange) []rrange {
	set = normalizeSet(append(set, rrange{0xD800, 0xDFFF}))
	var out []rrange
	next := rune(0)
	for _, r := range set {
		if r[0] > next {
			out = append(out, rrange{next, r[0] - 1})
		}
		next = max(next, r[1]+1)
	}
	if next <= 0x10FFFF {
		out = append(out, rrange{next, 0x10FFFF})
	}
	return out
}

// intersect is a ∩ b.
func intersect(a, b []rrange) []rrange {
	var out []rrange
	for _, x := range a {
		for _, y := range b {
			if lo, hi := max(x[0], y[0]), min(x[1], y[1]); lo <= hi {
				out = append(out, rrange{lo, hi})
			}
		}
	}
	return normalizeSet(out)
}
