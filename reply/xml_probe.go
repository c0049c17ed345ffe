package reply

import "strings"

// probeXMLParams recognises a call written as markup with one element per
// parameter, reading each marker from the rendering of the probe call
//
//	S0 probe_fn_alpha S1 probe_arg S2 probe_value S3
//
// S0 is the block and call openers, S1 the name's end and the parameter
// opener, S2 the key's end, S3 the value's end and the closers. The text
// between the two calls of the second rendering tells which of S0's
// markers opens each call and which the block.
func probeXMLParams(p probe) (string, callSyntax, bool) {
	one, two := strings.TrimSpace(p.one), strings.TrimSpace(p.two)
	tok := tagToken(one)
	if tok != "" {
		one, two = strings.ReplaceAll(one, tok, ""), strings.ReplaceAll(two, tok, "")
	}
	a := strings.Index(one, probeFnA)
	if a < 0 {
		return "", nil, false
	}
	k := strings.Index(one[a:], "probe_arg") + a
	v := strings.Index(one[k:], "probe_value") + k
	if k < a || v < k {
		return "", nil, false
	}
	s0, s1 := one[:a], one[a+len(probeFnA):k]
	s2, s3 := one[k+len("probe_arg"):v], one[v+len("probe_value"):]
	if strings.Contains(s1, "{") {
		return "", nil, false // the arguments are an object, not markup
	}
	b := strings.Index(two, probeFnB)
	endA := strings.Index(two, "probe_value") + len("probe_value")
	if b < 0 || endA < len("probe_value") || endA > b {
		return "", nil, false
	}
	x := &xmlParams{}
	// The call's opener is the markers that end s0 and also end the text
	// between the two calls.
	shared := len(tailShared(s0, two[endA:b]))
	var opens []string
	for _, sp := range tagSpans(s0) {
		if sp[0] >= len(s0)-shared {
			opens = append(opens, s0[sp[0]:sp[1]])
		}
	}
	if len(opens) == 0 {
		return "", nil, false
	}
	co := s0[len(s0)-shared:]
	co = co[strings.Index(co, opens[0]):]
	x.callOpen = opens[len(opens)-1]
	if len(opens) >= 2 {
		x.blockOpen, x.perBlock = opens[len(opens)-2], true
	} else if rem := tagParts(s0[:len(s0)-len(co)]); len(rem) > 0 && strings.HasPrefix(rem[len(rem)-1], "<") {
		x.blockOpen = rem[len(rem)-1]
	}
	if x.blockOpen != "" {
		x.blockClose = "</" + x.blockOpen[1:]
		if !strings.Contains(s3, x.blockClose) {
			x.blockClose = "" // read from the closers below
		}
	}
	mid := tagParts(s1)
	if len(mid) == 0 || len(mid) > 2 {
		return "", nil, false
	}
	x.paramOpen = mid[len(mid)-1]
	if len(mid) == 2 {
		x.nameEnd = mid[0]
		if names, end, ok := attributes(mid[0]); ok && len(names) > 0 {
			x.nameEnd, x.nameAttrs, x.attrEnd = `"`, names, end
		}
	}
	x.keyEnd = tagParts(s2)
	x.newlines = strings.HasSuffix(s2, "\n")
	if len(x.keyEnd) == 1 {
		if names, end, ok := attributes(x.keyEnd[0]); ok && len(names) > 0 {
			if x.attrEnd != "" && x.attrEnd != end {
				return "", nil, false
			}
			x.keyEnd, x.attrs, x.attrEnd, x.keyAttrs = []string{`"`}, true, end, names
		}
	}
	closers := tagParts(s3)
	if len(x.keyEnd) == 0 || len(closers) < 2 {
		return "", nil, false
	}
	x.valueEnd, x.callClose = closers[0], closers[1]
	if x.blockOpen != "" && !strings.HasPrefix(x.blockClose, "</") {
		// Not an XML pair (Kimi K3's <|open|>tools<|sep|>): the closer
		// is the one after the call's.
		if len(closers) < 3 {
			return "", nil, false
		}
		x.blockClose = closers[2]
		if i := strings.LastIndex(x.callClose, "<"); !strings.HasSuffix(x.blockClose, ">") && i > 0 {
			// The probe's difference cut the closer's last tag, which
			// the empty turn writes too; the call's closer has it.
			x.blockClose += x.callClose[i:]
		}
	}
	if x.valueEnd == "</probe_arg>" {
		x.keyed, x.valueEnd = true, "</"+keyHole+">"
	}
	if tok != "" {
		for _, m := range []*string{&x.blockOpen, &x.blockClose, &x.callOpen, &x.nameEnd, &x.paramOpen, &x.valueEnd, &x.callClose} {
			if strings.HasPrefix(*m, "<") {
				*m = tok + *m
			}
		}
		for i, k := range x.keyEnd {
			if strings.HasPrefix(k, "<") {
				x.keyEnd[i] = tok + k
			}
		}
	}
	return xmlName(x), x, true
}

// tagToken is a special token the template writes before every tag
// (MiniMax M3's "]<]minimax[>["), or "": the text before the first tag,
// when it recurs often enough to be one.
func tagToken(one string) string {
	for i := 0; i+1 < len(one); i++ {
		c := one[i+1]
		if one[i] == '<' && (c == '/' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			tok := one[:i]
			if len(tok) >= 3 && strings.Count(one, tok) >= 4 && !strings.Contains(tok, "probe") {
				return tok
			}
			return ""
		}
	}
	return ""
}

// xmlName names the format by the markers the probe found.
func xmlName(x *xmlParams) string {
	switch {
	case x.callOpen == "<function=" && x.blockOpen == "<tool_call>":
		return "qwen3-coder"
	case x.callOpen == "<function=" && x.blockOpen == "<seed:tool_call>":
		return "seed-oss"
	case x.paramOpen == "<arg_key>":
		return "glm"
	case strings.Contains(x.paramOpen, "arg_key"):
		return "hunyuan"
	case strings.Contains(x.callOpen, "DSML"):
		return "deepseek-dsml"
	case strings.Contains(x.blockOpen, "minimax") && x.keyed:
		return "minimax-m3"
	case strings.Contains(x.blockOpen, "minimax"):
		return "minimax-m2"
	case strings.HasPrefix(x.callOpen, "<|open|>"):
		return "kimi-k3"
	case strings.HasPrefix(x.callOpen, "<function name="):
		return "minicpm"
	}
	return "xml-params"
}

// tagParts splits markup into its markers: at whitespace next to a tag's
// end or start, and between a tag's end and the next tag's start.
func tagParts(s string) []string {
	var out []string
	for _, sp := range tagSpans(s) {
		out = append(out, s[sp[0]:sp[1]])
	}
	return out
}

// tagSpans are the start and end of each of tagParts' markers in s.
func tagSpans(s string) [][2]int {
	var out [][2]int
	start := 0
	flush := func(end int) {
		lo, hi := start, end
		for lo < hi && isSpace(s[lo]) {
			lo++
		}
		for hi > lo && isSpace(s[hi-1]) {
			hi--
		}
		if lo < hi {
			out = append(out, [2]int{lo, hi})
		}
		start = end
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '<' && i > 0 && (s[i-1] == '>' || isSpace(s[i-1])):
			flush(i)
		case isSpace(s[i]) && i > 0 && s[i-1] == '>':
			flush(i)
		}
	}
	flush(len(s))
	return out
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func tailShared(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return a[len(a)-n:]
}

// attributes reads `" a="1" b="2"END`, what follows a quoted name or key:
// the attribute names and END.
func attributes(part string) (names []string, end string, ok bool) {
	rest, ok := strings.CutPrefix(part, `"`)
	if !ok {
		return nil, "", false
	}
	for strings.HasPrefix(rest, " ") {
		name, after, found := strings.Cut(rest[1:], `="`)
		if !found || name == "" || strings.ContainsAny(name, " <>\"") {
			return nil, "", false
		}
		_, after, found = strings.Cut(after, `"`)
		if !found {
			return nil, "", false
		}
		names, rest = append(names, name), after
	}
	return names, rest, rest != ""
}
