package grammar

// array emits arrays: prefixItems position by position, then items, the
// length held within minItems..maxItems. Each further element is nested
// inside the optional group of the one before, so the length bounds are
// exact without counting rules.
func (e *emitter) array(c *conj) (string, bool, error) {
	if !c.arrayConstrained() {
		return e.base("array"), true, nil
	}
	ws := e.base("ws")
	maxN := c.maxItems // < 0: unbounded
	if c.items != nil && len(*c.items) == 0 {
		maxN = minBound(maxN, len(c.prefix)) // items: false
	}
	for i, p := range c.prefix {
		if len(p) == 0 { // a false prefix schema: the array ends before it
			maxN = minBound(maxN, i)
			break
		}
	}
	if maxN >= 0 && c.minItems > maxN {
		return "", false, nil
	}
	var elems []string
	for i := 0; i < len(c.prefix) && (maxN < 0 || i < maxN); i++ {
		x, _, err := e.valueRule(c.prefix[i], c.path+"-item"+itoa(i))
		if err != nil {
			return "", false, err
		}
		elems = append(elems, x)
	}
	tail := ""
	if maxN < 0 || maxN > len(c.prefix) {
		item := e.base("value")
		if c.items != nil {
			x, _, err := e.valueRule(*c.items, c.path+"-items")
			if err != nil {
				return "", false, err
			}
			item = x
		}
		lo := max(c.minItems-len(c.prefix), 0)
		hi := -1
		if maxN >= 0 {
			hi = maxN - len(c.prefix)
		}
		if len(elems) == 0 {
			// no prefix: the first element has no comma before it
			first := item + " " + ws
			if hi == 0 {
				return `"[" ` + ws + ` "]"`, c.minItems == 0, nil
			}
			more := rep(e.rule(c.path+"-more", `"," `+ws+" "+item+" "+ws), max(lo-1, 0), decr(hi))
			inner := seq(first, more)
			if lo == 0 {
				inner = "( " + inner + " )?"
			}
			return seq(`"["`, ws, inner, `"]"`), true, nil
		}
		if hi != 0 {
			tail = rep(e.rule(c.path+"-more", `"," `+ws+" "+item+" "+ws), lo, hi)
		}
	}
	// nest from the last prefix element outwards; every so many levels
	// the nest so far becomes a rule, so that the grammar's parentheses
	// stay within MaxGBNFNesting however many prefix items there are
	inner := tail
	for i := len(elems) - 1; i >= 0; i-- {
		sep := ""
		if i > 0 {
			sep = `"," ` + ws
		}
		group := seq(sep, elems[i], ws, inner)
		if i >= c.minItems {
			group = "( " + group + " )?"
		}
		inner = group
		if (len(elems)-i)%16 == 0 && i > 0 {
			inner = e.rule(c.path+"-from"+itoa(i), inner)
		}
	}
	return seq(`"["`, ws, inner, `"]"`), true, nil
}

func decr(hi int) int {
	if hi < 0 {
		return -1
	}
	return hi - 1
}
