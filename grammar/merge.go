package grammar

// maxAlternatives bounds the cross products allOf/anyOf build; a schema that
// multiplies out beyond it is refused rather than compiled for minutes.
const maxAlternatives = 256

// merge is the conjunction of two schemas: every pair of alternatives
// merged, the impossible pairs dropped.
func (cv *converter) merge(a, b dnf, path string) (dnf, error) {
	var out dnf
	for _, x := range a {
		for _, y := range b {
			m, err := cv.mergeConj(x, y, path)
			if err != nil {
				return nil, err
			}
			out = append(out, m...)
			if len(out) > maxAlternatives {
				return nil, unsupported(path, "allOf", "combining the subschemas gives more than %d alternatives", maxAlternatives)
			}
		}
	}
	return out, nil
}

// mergeOpt merges two optional schemas, nil meaning any value.
func (cv *converter) mergeOpt(a, b *dnf, path string) (*dnf, error) {
	switch {
	case a == nil:
		return b, nil
	case b == nil:
		return a, nil
	}
	m, err := cv.merge(*a, *b, path)
	return &m, err
}

func (cv *converter) mergeConj(x, y *conj, path string) (dnf, error) {
	cv.work.spend(conjCost + 16*(len(x.props)+len(y.props)+len(x.required)+len(y.required)+len(x.prefix)+len(y.prefix)))
	if y.ref != "" {
		x, y = y, x
	}
	if x.ref != "" {
		if y.isTrue() {
			return dnf{x}, nil
		}
		target, err := cv.expandRef(x.ref, path)
		if err != nil {
			return nil, err
		}
		return cv.merge(target, dnf{y}, path)
	}
	if x.isTrue() {
		return dnf{y}, nil
	}
	if y.isTrue() {
		return dnf{x}, nil
	}
	c := newConj(x.path)
	if c.types = x.types & y.types; c.types == 0 {
		return nil, nil
	}
	switch {
	case x.hasEnum && y.hasEnum:
		c.hasEnum = true
		c.enum = cv.intersectValues(x.enum, y.enum)
	case x.hasEnum:
		c.enum, c.hasEnum = x.enum, true
	case y.hasEnum:
		c.enum, c.hasEnum = y.enum, true
	}
	for _, s := range []*conj{x, y} {
		if s.lo != nil {
			c.raiseLo(s.lo, s.loExcl)
		}
		if s.hi != nil {
			c.lowerHi(s.hi, s.hiExcl)
		}
	}
	c.minLen = max(x.minLen, y.minLen)
	c.maxLen = minBound(x.maxLen, y.maxLen)
	c.minItems = max(x.minItems, y.minItems)
	c.maxItems = minBound(x.maxItems, y.maxItems)
	var err error
	if c.pattern, c.hasPattern, err = mergeString(x.pattern, x.hasPattern, y.pattern, y.hasPattern, path, "pattern"); err != nil {
		return nil, err
	}
	if c.format, _, err = mergeString(x.format, x.format != "", y.format, y.format != "", path, "format"); err != nil {
		return nil, err
	}
	if err := cv.mergeObject(c, x, y, path); err != nil {
		return nil, err
	}
	if err := cv.mergeArray(c, x, y, path); err != nil {
		return nil, err
	}
	return dnf{c}, nil
}

func minBound(a, b int) int {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

func mergeString(a string, hasA bool, b string, hasB bool, path, kw string) (string, bool, error) {
	switch {
	case hasA && hasB && a != b:
		return "", false, unsupported(path, kw, "two different %ss on one value (through allOf or $ref) are not supported", kw)
	case hasA:
		return a, true, nil
	}
	return b, hasB, nil
}

// mergeObject keeps x's property order, then y's new properties. A property
// one side declares and the other does not must also satisfy the other's
// additionalProperties, as JSON Schema evaluates each side on its own.
func (cv *converter) mergeObject(c, x, y *conj, path string) error {
	add := func(p prop, other *conj) error {
		s := p.schema
		if os, ok := other.propSchema(p.name); ok {
			m, err := cv.merge(s, os, path)
			if err != nil {
				return err
			}
			s = m
		} else if other.additional != nil {
			m, err := cv.merge(s, *other.additional, path)
			if err != nil {
				return err
			}
			s = m
		}
		c.props = append(c.props, prop{name: p.name, schema: s})
		return nil
	}
	for _, p := range x.props {
		if err := add(p, y); err != nil {
			return err
		}
	}
	for _, p := range y.props {
		if _, done := x.propSchema(p.name); !done {
			if err := add(p, x); err != nil {
				return err
			}
		}
	}
	c.required = unionStrings(x.required, y.required)
	var err error
	c.additional, err = cv.mergeOpt(x.additional, y.additional, path)
	return err
}

func (cv *converter) mergeArray(c, x, y *conj, path string) error {
	n := max(len(x.prefix), len(y.prefix))
	for i := 0; i < n; i++ {
		m, err := cv.mergeOpt(x.itemAt(i), y.itemAt(i), path)
		if err != nil {
			return err
		}
		if m == nil {
			c.prefix = append(c.prefix, trueDNF(path))
		} else {
			c.prefix = append(c.prefix, *m)
		}
	}
	var err error
	c.items, err = cv.mergeOpt(x.items, y.items, path)
	return err
}

// intersectValues is the values of a that b also holds (JSON Schema's
// equality), in a's order: one key per value, a map for b.
func (cv *converter) intersectValues(a, b []any) []any {
	in := make(map[string]bool, len(b))
	for _, w := range b {
		in[cv.valueKey(w)] = true
	}
	var out []any
	for _, v := range a {
		if in[cv.valueKey(v)] {
			out = append(out, v)
		}
	}
	return out
}

// valueKey is valueKey, paid for from the budget.
func (cv *converter) valueKey(v any) string {
	k := valueKey(v)
	cv.work.spend(16 + len(k))
	return k
}

// unionStrings is a's strings then b's not in a, each once.
func unionStrings(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, list := range [][]string{a, b} {
		for _, s := range list {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}
