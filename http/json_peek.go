package http

import (
	"encoding/json"
	"strings"
)

// peekFields returns the raw values of the top-level members of the JSON
// object body whose names are in want (matched as encoding/json matches a
// struct field: case-insensitively, escapes decoded; the last of
// duplicates wins), without decoding anything else. It skips the other
// members' values by their brackets and string quotes alone, about ten
// times faster than encoding/json, since the route reads a request's model
// before its handler parses the whole body. It validates nothing beyond
// that: a malformed body yields what was found before the fault, and the
// handler refuses the body with its own 400.
func peekFields(body []byte, want ...string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return out
	}
	i++
	for {
		i = skipSpace(body, i)
		if i >= len(body) || body[i] != '"' {
			return out
		}
		end := skipString(body, i)
		if end < 0 {
			return out
		}
		key := memberName(body[i:end])
		i = skipSpace(body, end)
		if i >= len(body) || body[i] != ':' {
			return out
		}
		i = skipSpace(body, i+1)
		vend := skipValue(body, i)
		if vend < 0 {
			return out
		}
		for _, w := range want {
			if strings.EqualFold(key, w) {
				out[w] = json.RawMessage(body[i:vend])
			}
		}
		i = skipSpace(body, vend)
		if i >= len(body) || body[i] != ',' {
			return out
		}
		i++
	}
}

// memberName is a quoted member name's text.
func memberName(quoted []byte) string {
	if !strings.ContainsRune(string(quoted), '\\') {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return ""
	}
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]
// (a quote), or -1 when it does not end.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the value starting at b[i], or -1
// when it does not end: a string by its quotes, an object or array by its
// brackets (strings inside skipped whole), anything else up to the next
// delimiter.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end := skipString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
