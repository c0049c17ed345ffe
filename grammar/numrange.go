package grammar

import (
	"math/big"
	"strings"
)

// number emits the numbers a schema admits. Unbounded numbers take JSON's
// full syntax; bounded ones are plain decimals (no exponent), exact at the
// bounds: the integer part is an integer range, and at a bound's own integer
// part the fraction digits are compared digit by digit.
func (e *emitter) number(c *conj) (string, bool, error) {
	if c.types&tFraction == 0 {
		if !c.numberBounded() {
			return e.base("integer"), true, nil
		}
		x, ok := intRange(intBounds(c))
		return x, ok, nil
	}
	if !c.numberBounded() {
		return e.base("number"), true, nil
	}
	lo, hi := c.lo, c.hi
	if lo != nil && hi != nil {
		if cmp := lo.Cmp(hi); cmp > 0 || cmp == 0 && (c.loExcl || c.hiExcl) {
			return "", false, nil
		}
	}
	var alts []string
	zero := new(big.Rat)
	if hi == nil || hi.Sign() >= 0 {
		a, aIncl := zero, true
		if lo != nil && lo.Sign() >= 0 {
			a, aIncl = lo, !c.loExcl
		}
		if x, ok := decRange(a, aIncl, hi, !c.hiExcl); ok {
			alts = append(alts, x)
		}
	}
	if lo == nil || lo.Sign() < 0 {
		a, aIncl := zero, false // magnitude 0 excluded: no "-0"
		if hi != nil && hi.Sign() < 0 {
			a, aIncl = new(big.Rat).Neg(hi), !c.hiExcl
		}
		var b *big.Rat
		if lo != nil {
			b = new(big.Rat).Neg(lo)
		}
		if x, ok := decRange(a, aIncl, b, !c.loExcl); ok {
			alts = append(alts, `"-" `+x)
		}
	}
	return alternation(alts)
}

// intBounds turns a conj's bounds into the integers they admit.
func intBounds(c *conj) (lo, hi *big.Int) {
	if c.lo != nil {
		lo = floor(c.lo)
		if c.loExcl || !c.lo.IsInt() {
			lo.Add(lo, bigOne)
		}
	}
	if c.hi != nil {
		hi = floor(c.hi)
		if c.hiExcl && c.hi.IsInt() {
			hi.Sub(hi, bigOne)
		}
	}
	return lo, hi
}

func floor(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m // Euclidean division with a positive denominator is floor
	return q
}

// splitDecimal is a non-negative r as its integer part and its fraction
// digits without trailing zeros.
func splitDecimal(r *big.Rat) (*big.Int, string) {
	s := ratDecimal(r)
	i, f, _ := strings.Cut(s, ".")
	n, _ := new(big.Int).SetString(i, 10)
	return n, f
}

// decRange is the non-negative decimals in [a, b] (b nil: unbounded), each
// end included or not.
func decRange(a *big.Rat, aIncl bool, b *big.Rat, bIncl bool) (string, bool) {
	anyFrac := `( "." [0-9]+ )?`
	ai, af := splitDecimal(a)
	lowFrac := &fracBound{digits: af, strict: !aIncl}
	var alts []string
	if b == nil {
		if x, ok := natRange(new(big.Int).Add(ai, bigOne), nil); ok {
			alts = append(alts, x+" "+anyFrac)
		}
		if x, ok := fraction(lowFrac, nil); ok {
			alts = append(alts, seq(lit(ai.String()), x))
		}
		y, ok, _ := alternation(alts)
		return y, ok
	}
	bi, bf := splitDecimal(b)
	highFrac := &fracBound{digits: bf, strict: !bIncl}
	if ai.Cmp(bi) == 0 {
		x, ok := fraction(lowFrac, highFrac)
		return seq(lit(ai.String()), x), ok
	}
	if x, ok := natRange(new(big.Int).Add(ai, bigOne), new(big.Int).Sub(bi, bigOne)); ok {
		alts = append(alts, x+" "+anyFrac)
	}
	if x, ok := fraction(lowFrac, nil); ok {
		alts = append(alts, seq(lit(ai.String()), x))
	}
	if x, ok := fraction(nil, highFrac); ok {
		alts = append(alts, seq(lit(bi.String()), x))
	}
	y, ok, _ := alternation(alts)
	return y, ok
}

// fracBound bounds the fraction 0.g of a number by 0.digits.
type fracBound struct {
	digits string
	strict bool
}

// fraction is the optional ".digits" part whose value lies within lo and
// hi (nil: no bound that side).
func fraction(lo, hi *fracBound) (string, bool) {
	body, nonEmpty, empty := fracDigits(lo, hi)
	switch {
	case nonEmpty && empty:
		return `( "." ` + body + ` )?`, true
	case nonEmpty:
		return `"." ` + body, true
	case empty:
		return "", true
	}
	return "", false
}

// fracDigits is the non-empty digit strings g with 0.g within the bounds,
// and whether the empty string (value 0) is within them too.
func fracDigits(lo, hi *fracBound) (body string, nonEmpty, empty bool) {
	if lo != nil && lo.digits == "" && !lo.strict {
		lo = nil // ≥ 0 bounds nothing
	}
	empty = lo == nil && (hi == nil || hi.digits != "" || !hi.strict)
	switch {
	case lo == nil && hi == nil:
		return "[0-9]+", true, true
	case hi != nil && hi.digits == "":
		// ≤ 0 (or < 0): only zeros, and only without a lower bound above 0
		return `"0"+`, lo == nil && !hi.strict, empty
	case lo != nil && lo.digits == "" && hi == nil:
		return "[0-9]* [1-9] [0-9]*", true, false // > 0
	}
	dl, dh := -1, 10
	if lo != nil && lo.digits != "" {
		dl = int(lo.digits[0] - '0')
	} else if lo != nil {
		dl = 0
	}
	if hi != nil {
		dh = int(hi.digits[0] - '0')
	}
	var alts []string
	if mid0, mid1 := max(dl+1, 0), min(dh-1, 9); mid0 <= mid1 {
		alts = append(alts, digitClass(byte('0'+mid0), byte('0'+mid1))+" [0-9]*")
	}
	for i, d := range []int{dl, dh} {
		if i == 1 && dh == dl {
			break
		}
		if d < 0 || d > 9 {
			continue
		}
		var tlo, thi *fracBound
		if d == dl {
			tlo = &fracBound{digits: rest(lo.digits), strict: lo.strict}
		}
		if d == dh {
			thi = &fracBound{digits: hi.digits[1:], strict: hi.strict}
		}
		t, tNonEmpty, tEmpty := fracDigits(tlo, thi)
		head := lit(string(rune('0' + d)))
		switch {
		case tNonEmpty && tEmpty:
			alts = append(alts, head+" ( "+t+" )?")
		case tNonEmpty:
			alts = append(alts, head+" "+t)
		case tEmpty:
			alts = append(alts, head)
		}
	}
	if len(alts) == 0 {
		return "", false, empty
	}
	return "(" + strings.Join(alts, " | ") + ")", true, empty
}

func rest(s string) string {
	if s == "" {
		return ""
	}
	return s[1:]
}
