package grammar

import "strings"

// Prefixed returns the GBNF text with every rule name, where defined and
// where referred to, prefixed with prefix, so that the rules of several
// converted schemas can sit in one grammar without clashing ("root",
// "string", "value" …). String literals, character classes and repetition
// counts are left as they are.
func Prefixed(gbnf, prefix string) string {
	var b strings.Builder
	b.Grow(len(gbnf) + len(prefix)*strings.Count(gbnf, "\n"))
	for i := 0; i < len(gbnf); {
		c := gbnf[i]
		switch {
		case c == '"' || c == '[':
			end := closing(gbnf, i)
			b.WriteString(gbnf[i:end])
			i = end
		case c == '{':
			end := strings.IndexByte(gbnf[i:], '}')
			if end < 0 {
				end = len(gbnf) - i - 1
			}
			b.WriteString(gbnf[i : i+end+1])
			i += end + 1
		case c == '#':
			end := strings.IndexByte(gbnf[i:], '\n')
			if end < 0 {
				end = len(gbnf) - i
			}
			b.WriteString(gbnf[i : i+end])
			i += end
		case isNameByte(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(gbnf) && isNameByte(gbnf[j]) {
				j++
			}
			b.WriteString(prefix)
			b.WriteString(gbnf[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// closing returns the index just past the literal or class that opens at
// s[i], honouring backslash escapes.
func closing(s string, i int) int {
	end := byte('"')
	if s[i] == '[' {
		end = ']'
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case end:
			return j + 1
		}
	}
	return len(s)
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
