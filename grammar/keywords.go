package grammar

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
)

// combinators are read by normalizeObject after the keywords of the schema
// itself.
var combinators = map[string]bool{"$ref": true, "allOf": true, "anyOf": true, "oneOf": true, "nullable": true}

// ownKeyword applies one keyword of a schema object to its conj.
func (cv *converter) ownKeyword(c *conj, kw string, val any, path string) error {
	if combinators[kw] {
		return nil
	}
	var err error
	switch kw {
	case "type":
		c.types, err = readTypes(val, path)
	case "enum":
		list, ok := val.([]any)
		if !ok {
			return invalid(path, kw, "not an array")
		}
		c.enum, c.hasEnum = list, true
	case "const":
		c.enum, c.hasEnum = []any{val}, true
	case "minimum", "exclusiveMinimum":
		var r *big.Rat
		if r, err = number(val, path, kw); err == nil {
			c.raiseLo(r, kw == "exclusiveMinimum")
		}
	case "maximum", "exclusiveMaximum":
		var r *big.Rat
		if r, err = number(val, path, kw); err == nil {
			c.lowerHi(r, kw == "exclusiveMaximum")
		}
	case "minLength":
		c.minLen, err = count(val, path, kw)
	case "maxLength":
		c.maxLen, err = count(val, path, kw)
	case "minItems":
		c.minItems, err = count(val, path, kw)
	case "maxItems":
		c.maxItems, err = count(val, path, kw)
	case "pattern":
		s, ok := val.(string)
		if !ok {
			return invalid(path, kw, "not a string")
		}
		if _, err := parseRegex(s); err != nil {
			return patternError(path, err)
		}
		c.pattern, c.hasPattern = s, true
	case "format":
		s, ok := val.(string)
		if !ok {
			return invalid(path, kw, "not a string")
		}
		if _, ok := formatRules[s]; !ok {
			return unsupported(path, kw, "format %q is not supported (supported: %s)", s, supportedFormats())
		}
		c.format = s
	case "properties":
		return cv.readProperties(c, val, path)
	case "required":
		list, ok := val.([]any)
		if !ok {
			return invalid(path, kw, "not an array")
		}
		names := make([]string, 0, len(list))
		for _, v := range list {
			s, ok := v.(string)
			if !ok {
				return invalid(path, kw, "not an array of strings")
			}
			names = append(names, s)
		}
		c.required = unionStrings(c.required, names)
	case "additionalProperties":
		d, err := cv.normalize(val, pointer(path, kw))
		if err != nil {
			return err
		}
		c.additional = &d // kept even when true: under Strict, stating true is what allows extras
	case "items":
		d, err := cv.normalize(val, pointer(path, kw))
		if err != nil {
			return err
		}
		if !d.isTrue() {
			c.items = &d
		}
	case "prefixItems":
		list, ok := val.([]any)
		if !ok {
			return invalid(path, kw, "not an array")
		}
		for i, v := range list {
			d, err := cv.normalize(v, pointer(path, kw, itoa(i)))
			if err != nil {
				return err
			}
			c.prefix = append(c.prefix, d)
		}
	case "uniqueItems":
		if b, ok := val.(bool); !ok || b {
			return unsupported(path, kw, "uniqueItems: true cannot be stated by a grammar")
		}
	default:
		return unsupported(path, kw, "")
	}
	return err
}

// patternError is a pattern's parse error as the converter reports it: a
// *LimitError placed at the schema, any other an unsupported pattern.
func patternError(path string, err error) error {
	var limit *LimitError
	if errors.As(err, &limit) {
		placed := *limit
		placed.At = pathOrRoot(path)
		return &placed
	}
	return unsupported(path, "pattern", "%v", err)
}

func readTypes(val any, path string) (typeMask, error) {
	names := []any{val}
	if list, ok := val.([]any); ok {
		names = list
	}
	var m typeMask
	for _, n := range names {
		s, _ := n.(string)
		t, ok := typeNames[s]
		if !ok {
			return 0, invalid(path, "type", "unknown type %v", n)
		}
		m |= t
	}
	return m, nil
}

func (cv *converter) readProperties(c *conj, val any, path string) error {
	o, ok := val.(*object)
	if !ok {
		return invalid(path, "properties", "not an object")
	}
	for _, name := range o.keys {
		d, err := cv.normalize(o.vals[name], pointer(path, "properties", name))
		if err != nil {
			return err
		}
		c.props = append(c.props, prop{name: name, schema: d})
	}
	return nil
}

func (c *conj) raiseLo(r *big.Rat, excl bool) {
	if c.lo == nil || r.Cmp(c.lo) > 0 {
		c.lo, c.loExcl = r, excl
	} else if r.Cmp(c.lo) == 0 {
		c.loExcl = c.loExcl || excl
	}
}

func (c *conj) lowerHi(r *big.Rat, excl bool) {
	if c.hi == nil || r.Cmp(c.hi) < 0 {
		c.hi, c.hiExcl = r, excl
	} else if r.Cmp(c.hi) == 0 {
		c.hiExcl = c.hiExcl || excl
	}
}

// pointerEscape and pointerUnescape are RFC 6901's escapes, built once: a
// replacer is costly to build, and paths are made for every subschema.
var (
	pointerEscape   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescape = strings.NewReplacer("~1", "/", "~0", "~")
)

// pointer extends a JSON pointer by reference tokens, escaped per RFC 6901.
func pointer(path string, tokens ...string) string {
	var b strings.Builder
	b.WriteString(path)
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscape.Replace(t))
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }
