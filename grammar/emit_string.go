package grammar

// str emits strings: a length range over the generic character rule, or a
// pattern, or a format. A length bound beside a pattern or a format would
// need the intersection of two languages, which this converter does not
// build: that combination is refused.
func (e *emitter) str(c *conj) (string, bool, error) {
	if c.maxLen >= 0 && c.minLen > c.maxLen {
		return "", false, nil
	}
	quote := `"\""`
	if c.hasPattern || c.format != "" {
		switch {
		case c.hasPattern && c.format != "":
			return "", false, unsupported(c.path, "format", "format together with pattern is not supported")
		case c.minLen > 0:
			return "", false, unsupported(c.path, "minLength", "minLength together with pattern or format is not supported")
		case c.maxLen >= 0:
			return "", false, unsupported(c.path, "maxLength", "maxLength together with pattern or format is not supported")
		}
		if c.format != "" {
			return seq(quote, e.format(c.format), quote), true, nil
		}
		body, ok, err := e.pattern(c.pattern, c.path)
		if err != nil || !ok {
			return "", false, err
		}
		return seq(quote, body, quote), true, nil
	}
	if c.minLen == 0 && c.maxLen < 0 {
		return e.base("string"), true, nil
	}
	return seq(quote, rep(e.base("char"), c.minLen, c.maxLen), quote), true, nil
}

// pattern emits a pattern's language over a string's JSON text: each
// character set as the raw characters JSON allows unescaped plus the
// escapes of the others. Unanchored sides match any characters.
func (e *emitter) pattern(src, path string) (string, bool, error) {
	n, err := parseRegex(src)
	if err != nil {
		return "", false, patternError(path, err)
	}
	var alts []string
	for _, branch := range n.subs {
		subs := branch.subs
		begin := len(subs) > 0 && subs[0].kind == reBegin
		if begin {
			subs = subs[1:]
		}
		end := len(subs) > 0 && subs[len(subs)-1].kind == reEnd
		if end {
			subs = subs[:len(subs)-1]
		}
		body := &reNode{kind: reCat, subs: subs}
		if hasAnchor(body) {
			return "", false, unsupported(path, "pattern", "anchors (^, $) are supported only at the start and end of the pattern or of a top-level alternative")
		}
		x, ok := e.regex(body, path)
		if !ok {
			continue
		}
		anyChars := e.base("char") + "*"
		if !begin {
			x = seq(anyChars, x)
		}
		if !end {
			x = seq(x, anyChars)
		}
		alts = append(alts, x)
	}
	return alternation(alts)
}

func hasAnchor(n *reNode) bool {
	if n.kind == reBegin || n.kind == reEnd {
		return true
	}
	for _, s := range n.subs {
		if hasAnchor(s) {
			return true
		}
	}
	return false
}

// regex emits a node; ok is false for a node no text matches.
func (e *emitter) regex(n *reNode, path string) (string, bool) {
	e.cv.work.spend(16 * (1 + len(n.subs)))
	switch n.kind {
	case reSet:
		return e.charSet(n.set)
	case reCat:
		var parts []string
		for _, s := range n.subs {
			x, ok := e.regex(s, path)
			if !ok {
				return "", false
			}
			parts = append(parts, x)
		}
		return seq(parts...), true
	case reAlt:
		var alts []string
		for _, s := range n.subs {
			if x, ok := e.regex(s, path); ok {
				alts = append(alts, x)
			}
		}
		x, ok, _ := alternation(alts)
		return x, ok
	case reRep:
		x, ok := e.regex(n.subs[0], path)
		if !ok {
			return `""`, n.min == 0
		}
		if !isName(x) {
			x = e.rule(path+"-re", x)
		}
		if n.max == 0 {
			return `""`, true
		}
		return rep(x, n.min, n.max), true
	}
	return "", false
}

// charSet is one character of set as JSON text.
func (e *emitter) charSet(set []rrange) (string, bool) {
	var alts []string
	raw := intersect(set, negate([]rrange{{'"', '"'}, {'\\', '\\'}, {0, 0x1f}}))
	if len(raw) > 0 {
		alts = append(alts, class(raw, false))
	}
	for _, r := range escapedRunes() {
		if len(intersect(set, []rrange{{r, r}})) > 0 {
			alts = append(alts, lit(jsonCharText(r)))
		}
	}
	x, ok, _ := alternation(alts)
	return x, ok
}
