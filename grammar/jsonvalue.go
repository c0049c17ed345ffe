package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
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
// digits, so a number beyond it has no exact value here. It bounds the
// digits written too: big.Rat arithmetic on a number is quadratic in its
// length.
const maxNumberDigits = 1000

// decimal is a JSON number as digits × 10^exp, read from its text in one
// pass: equality, integrality and the plain spelling need no big.Rat.
type decimal struct {
	neg    bool
	digits string // significant digits, no leading or trailing zeros; "" is 0
	exp    int
	exact  bool // the exponent fits (|exp| < 1e15); otherwise only the text is known
}

func parseDecimal(s string) decimal {
	d := decimal{exact: true}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil || e > 1e15 || e < -1e15 {
			return decimal{digits: s}
		}
		d.exp = int(e)
	}
	if strings.HasPrefix(mant, "-") {
		d.neg, mant = true, mant[1:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	d.exp -= len(frac)
	digits := strings.TrimLeft(whole+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	d.exp += len(digits) - len(trimmed)
	d.digits = trimmed
	if d.digits == "" {
		d.neg, d.exp = false, 0
	}
	return d
}

func (d decimal) isInt() bool { return d.exact && d.exp >= 0 }

// key is the number's identity: equal values, equal keys.
func (d decimal) key() string {
	if !d.exact {
		return "n~" + d.digits
	}
	sign := ""
	if d.neg {
		sign = "-"
	}
	return "n" + sign + d.digits + "e" + strconv.Itoa(d.exp)
}

// plain writes the number without an exponent; ok is false when that
// would pass maxNumberDigits.
func (d decimal) plain() (string, bool) {
	if !d.exact || len(d.digits) > maxNumberDigits || d.exp > maxNumberDigits || d.exp < -maxNumberDigits-len(d.digits) {
		return "", false
	}
	var b strings.Builder
	if d.neg {
		b.WriteByte('-')
	}
	switch {
	case d.digits == "":
		b.WriteByte('0')
	case d.exp >= 0:
		b.WriteString(d.digits)
		b.WriteString(strings.Repeat("0", d.exp))
	case -d.exp >= len(d.digits):
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -d.exp-len(d.digits)))
		b.WriteString(d.digits)
	default:
		point := len(d.digits) + d.exp
		b.WriteString(d.digits[:point])
		b.WriteByte('.')
		b.WriteString(d.digits[point:])
	}
	return b.String(), true
}

// numberRat is the exact value of a JSON number; ok is false for one
// longer than maxNumberDigits or whose exponent would write it out beyond
// them.
func numberRat(n json.Number) (*big.Rat, bool) {
	s := string(n)
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		if err != nil || exp > maxNumberDigits || exp < -maxNumberDigits {
			return nil, false
		}
		mant = s[:i]
	}
	if len(mant) > maxNumberDigits+2 { // a sign and a point besides the digits
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// canonicalNumber writes a number the way the grammars spell numbers:
// plain decimal, no exponent, an integral value without a fraction, so 1.0
// and 1 (one value to JSON Schema) are one text.
func canonicalNumber(n json.Number) string {
	if text, ok := parseDecimal(string(n)).plain(); ok {
		return text
	}
	return string(n)
}

// ratDecimal writes r (a finite decimal, as every JSON number is) exactly:
// r's denominator is 2^a·5^b, so r·10^k is an integer for k = its bit
// length (≥ a+b), and one multiplication and division write every digit.
func ratDecimal(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	k := r.Denom().BitLen()
	scaled := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil)
	scaled.Mul(scaled, r.Num())
	scaled.Quo(scaled, r.Denom())
	neg := scaled.Sign() < 0
	digits := scaled.Abs(scaled).String()
	if len(digits) <= k {
		digits = strings.Repeat("0", k-len(digits)+1) + digits
	}
	s := digits[:len(digits)-k] + "." + strings.TrimRight(digits[len(digits)-k:], "0")
	s = strings.TrimSuffix(s, ".")
	if neg {
		s = "-" + s
	}
	return s
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

// valueKey is v's identity under JSON Schema's equality (numbers by
// value, objects regardless of key order): equal values, equal keys, so
// sets of values are maps and intersecting two enums is linear, where
// comparing every pair was quadratic. Strings are length-prefixed, so no
// key is a prefix of another's framing.
func valueKey(v any) string {
	var b strings.Builder
	writeKey(&b, v)
	return b.String()
}

func writeKey(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteByte('z')
	case bool:
		if t {
			b.WriteByte('t')
		} else {
			b.WriteByte('f')
		}
	case json.Number:
		b.WriteString(parseDecimal(string(t)).key())
	case string:
		b.WriteByte('s')
		b.WriteString(strconv.Itoa(len(t)))
		b.WriteByte(':')
		b.WriteString(t)
	case []any:
		b.WriteByte('[')
		for _, e := range t {
			writeKey(b, e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case *object:
		keys := append([]string(nil), t.keys...)
		sort.Strings(keys)
		b.WriteByte('{')
		for _, k := range keys {
			writeKey(b, k)
			writeKey(b, t.vals[k])
		}
		b.WriteByte('}')
	}
}
