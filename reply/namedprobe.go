package reply

import "strings"

// probeNamedJSON recognises a call written as markers around the tool's
// name and then its arguments as a JSON object (namedJSON). The markers
// are read off the probe: what precedes the name is a section's begin and
// a call's opener, what follows the arguments a call's closer and the
// section's end; the text between the two calls of the second probe tells
// which is which.
func probeNamedJSON(p probe) (string, callSyntax, bool) {
	const id = "\x00" // where the template wrote a call's id
	one := strings.ReplaceAll(p.one, probeIDA, id)
	two := strings.ReplaceAll(strings.ReplaceAll(p.two, probeIDA, id), probeIDB, id)
	n := strings.Index(one, probeFnA)
	if n < 0 {
		return "", nil, false
	}
	argStart := strings.IndexByte(one[n:], '{')
	if argStart < 0 {
		return "", nil, false
	}
	argStart += n
	argEnd := jsonEnd(one, argStart)
	sep := one[n+len(probeFnA) : argStart]
	if argEnd < 0 || sep == "" || strings.Contains(sep, probeFnA) {
		return "", nil, false
	}
	before, after := strings.TrimSpace(one[:n]), strings.TrimSpace(one[argEnd:])
	s := &namedJSON{open: before, sep: sep, close: after}
	if !p.single {
		nb := strings.Index(two, probeFnB)
		if nb < argEnd || !strings.HasPrefix(two, one[:argEnd]) || !strings.HasPrefix(two[nb+len(probeFnB):], sep) {
			return "", nil, false
		}
		mid := two[argEnd:nb]
		found := false
		for k := len(mid); k >= 0 && !found; k-- {
			c, o := strings.TrimSpace(mid[:k]), strings.TrimSpace(mid[k:])
			if o != "" && !insideMarker(c) && strings.HasPrefix(after, c) && strings.HasSuffix(before, o) {
				s.close, s.open = c, o
				s.begin = strings.TrimSpace(strings.TrimSuffix(before, o))
				s.end = strings.TrimSpace(strings.TrimPrefix(after, c))
				found = true
			}
		}
		if !found {
			return "", nil, false
		}
	}
	if i := strings.Index(s.open, id); i >= 0 {
		s.open, s.idSep = s.open[:i], s.open[i+len(id):]
	}
	if i := strings.Index(s.sep, id); i >= 0 {
		s.sep, s.postID = s.sep[:i], s.sep[i+len(id):]
	}
	for _, m := range []string{s.begin, s.open, s.idSep, s.sep, s.postID, s.close, s.end} {
		if strings.Contains(m, id) {
			return "", nil, false
		}
	}
	if strings.TrimSpace(s.open) == "" || s.idSep != "" && strings.TrimSpace(s.idSep) == "" || s.postID != "" && (s.sep == "" || strings.TrimSpace(s.postID) == "") {
		return "", nil, false
	}
	return namedJSONName(s), s, true
}

// namedJSONName names a named-JSON format for logs by the family that
// writes its markers.
func namedJSONName(s *namedJSON) string {
	switch {
	case s.open == "<function=":
		return "functionary-v3.1"
	case s.open == ">>>":
		return "functionary-v3.2"
	case s.open == "[TOOL_CALLS]":
		return "mistral"
	case s.begin == "<|tool_calls|>":
		return "solar-open"
	case strings.Contains(s.open, "tool▁call▁begin") && strings.Contains(s.open, "function<｜tool▁sep｜>"):
		return "deepseek-r1"
	case strings.Contains(s.open, "tool▁call▁begin"):
		return "deepseek-v3.1"
	}
	return "named-json"
}
