package reply

// jsonEnd returns the end of the JSON value that starts at s[i] (after any
// whitespace), -1 when s ends before the value does, or -2 when s[i:] is
// not the start of a JSON object or array. Only objects and arrays are
// scanned: they are what calls are written as, and their end is certain
// from the brackets alone. Strings are skipped with their escapes, so a
// bracket inside one does not count; single-quoted strings are skipped
// too, for the templates that print arguments as a Python dict (a quote
// outside a string never occurs in JSON, so JSON is scanned the same).
func jsonEnd(s string, i int) int {
	i = skipSpace(s, i)
	if i >= len(s) {
		return -1
	}
	if s[i] != '{' && s[i] != '[' {
		return -2
	}
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			q := s[i]
			for i++; i < len(s) && s[i] != q; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// hasPrefixOrIsPrefix reports whether s starts with p, or s is a proper
// prefix of p (more text could still make it start with p).
func hasPrefixOrIsPrefix(s, p string) (full, partial bool) {
	if len(s) >= len(p) {
		return s[:len(p)] == p, false
	}
	return false, p[:len(s)] == s
}
