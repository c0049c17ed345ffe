package reply

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// pyLiteral converts a Python literal — what str() of a dict prints, and
// what models trained on such templates write — into JSON: dicts, lists,
// tuples, strings in either quote, numbers, True, False and None.
func pyLiteral(text string) (json.RawMessage, error) {
	r := pyReader{s: text}
	v, err := r.value()
	if err != nil {
		return nil, err
	}
	if r.skip(); r.i != len(r.s) {
		return nil, fmt.Errorf("text after the literal at byte %d", r.i)
	}
	return json.Marshal(v)
}

// pyKwargs reads the keyword arguments of a Python call, "a='x', b=2"
// (what is between its parentheses), as a JSON object.
func pyKwargs(text string) (json.RawMessage, error) {
	r := pyReader{s: text}
	out := map[string]any{}
	for r.skip(); r.i < len(r.s); r.skip() {
		j := r.i
		for j < len(r.s) && isIdentChar(r.s[j]) {
			j++
		}
		key := r.s[r.i:j]
		if r.i = skipSpace(r.s, j); key == "" || r.i >= len(r.s) || r.s[r.i] != '=' {
			return nil, fmt.Errorf("an argument is not written key=value")
		}
		r.i++
		v, err := r.value()
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", key, err)
		}
		out[key] = v
		if r.skip(); r.i < len(r.s) {
			if r.s[r.i] != ',' {
				return nil, fmt.Errorf("expected ',' at byte %d", r.i)
			}
			r.i++
		}
	}
	return json.Marshal(out)
}

// pyReader reads Python literals from s.
type pyReader struct {
	s     string
	i     int
	depth int // of the containers being read
}

// maxPyDepth bounds nesting: a reply of a million '[' must not recurse a
// million deep.
const maxPyDepth = 64

func (r *pyReader) skip() { r.i = skipSpace(r.s, r.i) }

func (r *pyReader) value() (any, error) {
	r.skip()
	if r.i >= len(r.s) {
		return nil, fmt.Errorf("the literal ends early")
	}
	switch c := r.s[r.i]; {
	case (c == '{' || c == '[' || c == '(') && r.depth >= maxPyDepth:
		return nil, fmt.Errorf("the literal nests deeper than %d", maxPyDepth)
	case c == '{':
		r.depth++
		defer func() { r.depth-- }()
		return r.dict()
	case c == '[' || c == '(':
		r.depth++
		defer func() { r.depth-- }()
		return r.list(map[byte]byte{'[': ']', '(': ')'}[c])
	case c == '"' || c == '\'':
		return r.str()
	}
	j := r.i
	for j < len(r.s) && !strings.ContainsRune(",:}]) \t\r\n", rune(r.s[j])) {
		j++
	}
	word := r.s[r.i:j]
	r.i = j
	switch word {
	case "True", "true":
		return true, nil
	case "False", "false":
		return false, nil
	case "None", "null":
		return nil, nil
	}
	if json.Valid([]byte(word)) && word[0] != '"' {
		return json.Number(word), nil
	}
	if n, err := strconv.ParseFloat(word, 64); err == nil && word != "" {
		return json.Number(strconv.FormatFloat(n, 'g', -1, 64)), nil
	}
	return nil, fmt.Errorf("%q is not a literal", word)
}

func (r *pyReader) dict() (any, error) {
	r.i++ // {
	out := map[string]any{}
	for {
		r.skip()
		if r.i < len(r.s) && r.s[r.i] == '}' {
			r.i++
			return out, nil
		}
		k, err := r.value()
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("a dict key is not a string")
		}
		if r.skip(); r.i >= len(r.s) || r.s[r.i] != ':' {
			return nil, fmt.Errorf("no ':' after the key %q", key)
		}
		r.i++
		if out[key], err = r.value(); err != nil {
			return nil, err
		}
		if err := r.comma('}'); err != nil {
			return nil, err
		}
	}
}

func (r *pyReader) list(close byte) (any, error) {
	r.i++ // [ or (
	out := []any{}
	for {
		r.skip()
		if r.i < len(r.s) && r.s[r.i] == close {
			r.i++
			return out, nil
		}
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if err := r.comma(close); err != nil {
			return nil, err
		}
	}
}

// comma reads the ',' between items, or sees the closing bracket.
func (r *pyReader) comma(close byte) error {
	r.skip()
	switch {
	case r.i < len(r.s) && r.s[r.i] == ',':
		r.i++
		return nil
	case r.i < len(r.s) && r.s[r.i] == close:
		return nil
	}
	return fmt.Errorf("expected ',' or %q at byte %d", close, r.i)
}

// str reads a quoted string with Python's common escapes.
func (r *pyReader) str() (any, error) {
	q := r.s[r.i]
	var b strings.Builder
	for r.i++; r.i < len(r.s); r.i++ {
		c := r.s[r.i]
		switch {
		case c == q:
			r.i++
			return b.String(), nil
		case c == '\\' && r.i+1 < len(r.s):
			r.i++
			switch e := r.s[r.i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'u', 'x':
				width := map[byte]int{'u': 4, 'x': 2}[e]
				if r.i+width >= len(r.s) {
					return nil, fmt.Errorf("a cut-short escape")
				}
				n, err := strconv.ParseUint(r.s[r.i+1:r.i+1+width], 16, 32)
				if err != nil {
					return nil, fmt.Errorf("a bad escape: %w", err)
				}
				b.WriteRune(rune(n))
				r.i += width
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return nil, fmt.Errorf("a string does not end")
}

// isIdentChar reports a byte of a Python identifier (ASCII).
func isIdentChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}
