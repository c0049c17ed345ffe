package grammar

import (
	"math/big"
	"strings"
)

// Integer ranges are exact: the grammar spells each integer in the range
// one way (no leading zeros, no "-0") and nothing outside it. Digit strings
// are split by length; within one length the usual prefix construction
// gives "at least lo" / "at most hi" suffixes.

var bigOne = big.NewInt(1)

// intRange is the integers in [lo, hi], either end nil for unbounded.
func intRange(lo, hi *big.Int) (string, bool) {
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return "", false
	}
	var alts []string
	zero := new(big.Int)
	if hi == nil || hi.Sign() >= 0 {
		a := zero
		if lo != nil && lo.Sign() > 0 {
			a = lo
		}
		if x, ok := natRange(a, hi); ok {
			alts = append(alts, x)
		}
	}
	if lo == nil || lo.Sign() < 0 {
		a := bigOne
		if hi != nil && hi.Sign() < 0 {
			a = new(big.Int).Neg(hi)
		}
		var b *big.Int
		if lo != nil {
			b = new(big.Int).Neg(lo)
		}
		if x, ok := posRange(a, b); ok {
			alts = append(alts, `"-" `+x)
		}
	}
	x, ok, _ := alternation(alts)
	return x, ok
}

// natRange is [a, b] over a ≥ 0; b nil is unbounded.
func natRange(a, b *big.Int) (string, bool) {
	if b != nil && a.Cmp(b) > 0 {
		return "", false
	}
	var alts []string
	if a.Sign() == 0 {
		alts = append(alts, `"0"`)
		a = bigOne
	}
	if x, ok := posRange(a, b); ok {
		alts = append(alts, x)
	}
	x, ok, _ := alternation(alts)
	return x, ok
}

// posRange is [a, b] over a ≥ 1; b nil is unbounded.
func posRange(a, b *big.Int) (string, bool) {
	if b != nil && a.Cmp(b) > 0 {
		return "", false
	}
	as := a.String()
	la := len(as)
	if b == nil {
		alts := []string{fixedRange(as, strings.Repeat("9", la)), "[1-9] [0-9]{" + itoa(la) + ",}"}
		return "(" + strings.Join(alts, " | ") + ")", true
	}
	bs := b.String()
	lb := len(bs)
	if la == lb {
		return fixedRange(as, bs), true
	}
	alts := []string{fixedRange(as, strings.Repeat("9", la))}
	if lb-la >= 2 { // every length strictly between: any digits
		alts = append(alts, "[1-9] "+digitsRange(la, lb-2))
	}
	alts = append(alts, fixedRange("1"+strings.Repeat("0", lb-1), bs))
	return "(" + strings.Join(alts, " | ") + ")", true
}

// digits is n digits; digitsRange is between lo and hi digits.
func digits(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "[0-9]"
	}
	return rep("[0-9]", n, n)
}

func digitsRange(lo, hi int) string { return rep("[0-9]", lo, hi) }

// fixedRange is the digit strings of len(lo) (= len(hi)) in [lo, hi].
func fixedRange(lo, hi string) string {
	if lo == hi {
		return lit(lo)
	}
	k := 0
	for lo[k] == hi[k] {
		k++
	}
	var parts []string
	if k > 0 {
		parts = append(parts, lit(lo[:k]))
	}
	rest := len(lo) - k - 1
	alts := []string{seq(lit(lo[k:k+1]), atLeast(lo[k+1:]))}
	if lo[k]+1 < hi[k] {
		alts = append(alts, seq(digitClass(lo[k]+1, hi[k]-1), digits(rest)))
	}
	alts = append(alts, seq(lit(hi[k:k+1]), atMost(hi[k+1:])))
	parts = append(parts, "("+strings.Join(alts, " | ")+")")
	return seq(parts...)
}

// atLeast is the digit strings of len(s) that are ≥ s.
func atLeast(s string) string {
	if strings.Trim(s, "0") == "" {
		return digits(len(s))
	}
	alts := []string{seq(lit(s[:1]), atLeast(s[1:]))}
	if s[0] < '9' {
		alts = append(alts, seq(digitClass(s[0]+1, '9'), digits(len(s)-1)))
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// atMost is the digit strings of len(s) that are ≤ s.
func atMost(s string) string {
	if strings.Trim(s, "9") == "" {
		return digits(len(s))
	}
	alts := []string{seq(lit(s[:1]), atMost(s[1:]))}
	if s[0] > '0' {
		alts = append(alts, seq(digitClass('0', s[0]-1), digits(len(s)-1)))
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

func digitClass(lo, hi byte) string {
	if lo == hi {
		return lit(string(lo))
	}
	return "[" + string(lo) + "-" + string(hi) + "]"
}

// seq joins grammar pieces, skipping empty ones.
func seq(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" && p != `""` {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return `""`
	}
	return strings.Join(out, " ")
}

// rep is x repeated lo to hi times (hi < 0: unbounded), split into pieces
// of at most 1000 so llama.cpp's repetition limit (2000) never applies.
// x must be one element (a name, a class, a literal or a group).
func rep(x string, lo, hi int) string {
	const chunk = 1000
	var parts []string
	opt := hi - lo
	for lo > 0 {
		n := min(lo, chunk)
		parts = append(parts, times(x, n))
		lo -= n
	}
	if hi < 0 {
		parts = append(parts, x+"*")
	}
	for ; opt > 0 && hi >= 0; opt -= chunk {
		if n := min(opt, chunk); n == 1 {
			parts = append(parts, x+"?")
		} else {
			parts = append(parts, x+"{0,"+itoa(n)+"}")
		}
	}
	return strings.Join(parts, " ")
}

func times(x string, n int) string {
	if n == 1 {
		return x
	}
	return x + "{" + itoa(n) + "}"
}
