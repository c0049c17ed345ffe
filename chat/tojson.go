package chat

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/ardanlabs/jinja"
)

// tojsonFilter is transformers' tojson filter, json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False). The
// engine's own tojson ignores ensure_ascii and, under indent, sorts keys and
// escapes <, > and &, so the template's tojson is renamed to this one (see
// renameInExpr). Arguments may be positional, in json.dumps's order.
func tojsonFilter(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: no value")
	}
	enc := jsonEncoder{item: ", ", key: ": "}
	params := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(args)-1 > len(params) {
		return jinja.Undefined(), errors.New("tojson: too many arguments")
	}
	opts := make(map[string]jinja.Value, len(kwargs)+len(args))
	for i, a := range args[1:] {
		opts[params[i]] = a
	}
	for k, v := range kwargs {
		if _, dup := opts[k]; dup {
			return jinja.Undefined(), fmt.Errorf("tojson: %s given twice", k)
		}
		opts[k] = v
	}
	for k, v := range opts {
		switch k {
		case "ensure_ascii":
			enc.ascii = v.IsTruthy()
		case "sort_keys":
			enc.sortKeys = v.IsTruthy()
		case "indent":
			switch {
			case v.IsNone() || v.IsUndefined():
			case v.IsInt():
				enc.indent, enc.indented = strings.Repeat(" ", int(max(0, min(v.AsInt(), 64)))), true
			case v.IsString():
				enc.indent, enc.indented = v.AsString(), true
			default:
				return jinja.Undefined(), errors.New("tojson: indent must be an integer or a string")
			}
		case "separators":
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: unexpected argument %q", k)
		}
	}
	if enc.indented {
		enc.item = "," // json.dumps drops the space after a comma when indenting
	}
	if sep, ok := opts["separators"]; ok && !sep.IsNone() {
		if !sep.IsList() || sep.AsList().Len() != 2 || !sep.AsList().Get(0).IsString() || !sep.AsList().Get(1).IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be two strings")
		}
		enc.item, enc.key = sep.AsList().Get(0).AsString(), sep.AsList().Get(1).AsString()
	}
	var b strings.Builder
	if err := enc.value(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

// jsonEncoder writes values as Python's json module does.
type jsonEncoder struct {
	item, key, indent string
	indented, ascii   bool
	sortKeys          bool
}

// maxJSONDepth bounds nesting, as Python's recursion limit does.
const maxJSONDepth = 500

func (e *jsonEncoder) value(b *strings.Builder, v jinja.Value, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("tojson: nesting too deep")
	}
	switch {
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(map[bool]string{true: "true", false: "false"}[v.AsBool()])
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pythonFloat(v.AsFloat(), true))
	case v.IsString():
		e.str(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(e.item)
			}
			e.newline(b, depth+1)
			if err := e.value(b, it, depth+1); err != nil {
				return err
			}
		}
		e.newline(b, depth)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if e.sortKeys {
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(e.item)
			}
			e.newline(b, depth+1)
			e.str(b, k)
			b.WriteString(e.key)
			val, _ := d.Get(k)
			if err := e.value(b, val, depth+1); err != nil {
				return err
			}
		}
		e.newline(b, depth)
		b.WriteByte('}')
	case v.IsUndefined():
		return errors.New("tojson: Object of type Undefined is not JSON serializable")
	default:
		return errors.New("tojson: object is not JSON serializable")
	}
	return nil
}

func (e *jsonEncoder) newline(b *strings.Builder, depth int) {
	if !e.indented {
		return
	}
	b.WriteByte('\n')
	for range depth {
		b.WriteString(e.indent)
	}
}

// str writes s as a JSON string the way json.dumps does: with ensure_ascii
// everything outside printable ASCII becomes \uXXXX (surrogate pairs beyond
// the BMP); without it only quotes, backslashes and control characters are
// escaped.
func (e *jsonEncoder) str(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (e.ascii && r == 0x7f):
				fmt.Fprintf(b, `\u%04x`, r)
			case e.ascii && r > 0x7f:
				if r > 0xffff {
					hi, lo := utf16.EncodeRune(r)
					fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pythonFloat formats f as Python's repr does (json spells the
// non-finite values Infinity and NaN): the shortest digits that round-trip,
// fixed notation with at least one decimal for exponents -4..15, otherwise
// d.ddde±XX.
func pythonFloat(f float64, forJSON bool) string {
	switch {
	case math.IsNaN(f):
		return map[bool]string{true: "NaN", false: "nan"}[forJSON]
	case math.IsInf(f, 1):
		return map[bool]string{true: "Infinity", false: "inf"}[forJSON]
	case math.IsInf(f, -1):
		return map[bool]string{true: "-Infinity", false: "-inf"}[forJSON]
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	mant, expText, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}
