package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// object is a JSON object that remembers the order its keys were written in:
// property order in a schema is the order the grammar emits properties in.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered parses one JSON document into nil, bool, json.Number,
// string, []any or *object. A duplicate key is an error: which of the two a
// schema meant cannot be guessed.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := o.vals[k]; dup {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			_, err := dec.Token()
			return o, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// maxNumberDigits bounds how long a number may grow when written out in
// plain decimal: "1e999999999" is 11 bytes of schema and a gigabyte of
// digits, so a number beyond it has no exact value here.
const maxNumberDigits = 1000

// numberRat is the exact value of a JSON number; ok is false for one whose
// exponent would write out beyond maxNumberDigits digits.
func numberRat(n json.Number) (*big.Rat, bool) {
	s := string(n)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		if err != nil || exp > maxNumberDigits || exp < -maxNumberDigits || i > maxNumberDigits {
			return nil, false
		}
	}
	return new(big.Rat).SetString(s)
}

// canonicalNumber writes a number the way the grammars spell numbers:
// plain decimal, no exponent, an integral value without a fraction, so 1.0
// and 1 (one value to JSON Schema) are one text.
func canonicalNumber(n json.Number) string {
	r, ok := numberRat(n)
	if !ok {
		return string(n)
	}
	return ratDecimal(r)
}

// ratDecimal writes r (a finite decimal, as every JSON number is) exactly.
func ratDecimal(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	digits := 0
	for x := new(big.Rat).Set(r); !x.IsInt(); digits++ {
		x.Mul(x, big.NewRat(10, 1))
	}
	s := r.FloatString(digits)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// canonicalJSON writes v compactly, keys in the object's order, strings
// escaped the one way jsonStringBody escapes them.
func canonicalJSON(v any) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(canonicalNumber(t))
	case string:
		b.WriteByte('"')
		b.WriteString(jsonStringBody(t))
		b.WriteByte('"')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case *object:
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, k)
			b.WriteByte(':')
			writeCanonical(b, t.vals[k])
		}
		b.WriteByte('}')
	}
}

// jsonStringBody is s escaped as inside a JSON string, the canonical way:
// only '"', '\\' and control characters are escaped, with the short escapes
// where JSON has one and lower-case \u00xx otherwise.
func jsonStringBody(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(jsonCharText(r))
	}
	return b.String()
}

func jsonCharText(r rune) string {
	switch r {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x20 {
		return fmt.Sprintf(`\u%04x`, r)
	}
	if r == utf8.RuneError {
		return string(utf8.RuneError)
	}
	return string(r)
}

// jsonEqual is JSON Schema's equality: numbers by value, objects regardless
// of key order.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := numberRat(x)
		ry, ok2 := numberRat(y)
		return ok1 && ok2 && rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case *object:
		y, ok := b.(*object)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for _, k := range x.keys {
			w, ok := y.vals[k]
			if !ok || !jsonEqual(x.vals[k], w) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
