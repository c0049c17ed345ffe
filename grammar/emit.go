package grammar

import (
	"fmt"
	"strings"
)

// emitter collects the rules of one grammar. Helper rules with the same
// body share a name, so repeated sub-schemas cost one rule.
type emitter struct {
	cv      *converter
	order   []string
	bodies  map[string]string // name → body
	byBody  map[string]string // body → name
	refRule map[string]string
	serial  int
	// references whose rule is named but not yet written (emitRefs)
	pendingRefs []pendingRef
	size        int // bytes of the rules defined
}

func newEmitter(cv *converter) *emitter {
	return &emitter{cv: cv, bodies: map[string]string{}, byBody: map[string]string{}, refRule: map[string]string{}}
}

// maxHint is the longest name made from a hint.
const maxHint = 40

// reserve picks a fresh rule name from a hint; define gives it a body.
func (e *emitter) reserve(hint string) string {
	if len(hint) > 4*maxHint {
		hint = hint[len(hint)-4*maxHint:] // the name keeps the end of it; a path can be long
	}
	var b strings.Builder
	for _, r := range strings.ToLower(hint) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > maxHint {
		base = strings.Trim(base[len(base)-maxHint:], "-")
	}
	if base == "" {
		base = "r"
	}
	if fixedName(base) {
		base = "s-" + base
	}
	name := base
	for _, taken := e.bodies[name]; taken; _, taken = e.bodies[name] {
		e.serial++
		name = fmt.Sprintf("%s-%d", base, e.serial)
	}
	e.bodies[name] = ""
	e.order = append(e.order, name)
	return name
}

// fixedName is a name the emitter gives its own rules (root, the generic
// JSON rules, formats), never a schema-derived one: a property called
// "value" must not become the generic value rule.
func fixedName(name string) bool {
	_, generic := baseRules[name]
	return generic || name == "root" || name == "ws" || strings.HasPrefix(name, "fmt-")
}

func (e *emitter) define(name, body string) {
	e.cv.work.spend(64 + len(name) + len(body))
	if e.size += len(name) + len(body) + 6; e.size > MaxGBNFBytes {
		panic(limitPanic{outputTooLarge()})
	}
	e.bodies[name] = body
	if _, ok := e.byBody[body]; !ok {
		e.byBody[body] = name
	}
}

// rule names body, reusing the rule that already has exactly this body.
func (e *emitter) rule(hint, body string) string {
	if name, ok := e.byBody[body]; ok {
		return name
	}
	name := e.reserve(hint)
	e.define(name, body)
	return name
}

// text writes the grammar: root first, then rules in creation order.
func (e *emitter) text(root string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "root ::= %s\n", root)
	for _, name := range e.order {
		fmt.Fprintf(&b, "%s ::= %s\n", name, e.bodies[name])
	}
	return b.String()
}

// never is a body no text matches, for a referenced schema that turns out
// to admit no value (a reference is emitted before its target is known).
const never = `[^\x00-\U0010FFFF]`

// dnf emits the alternatives of a schema; ok is false when none is
// possible (the schema admits no value).
func (e *emitter) dnf(d dnf) (string, bool, error) {
	if d.isTrue() {
		return e.base("value"), true, nil
	}
	var alts uniqueStrings
	for _, c := range d {
		x, ok, err := e.conj(c)
		if err != nil {
			return "", false, err
		}
		if ok {
			alts.add(x)
		}
	}
	return alternation(alts.list)
}

func alternation(alts []string) (string, bool, error) {
	switch len(alts) {
	case 0:
		return "", false, nil
	case 1:
		return alts[0], true, nil
	}
	return "(" + strings.Join(alts, " | ") + ")", true, nil
}

// uniqueStrings is a list without repeats, kept with a set (an enum of
// many values made a scan of the list per value quadratic).
type uniqueStrings struct {
	list []string
	seen map[string]bool
}

func (u *uniqueStrings) add(s string) {
	if u.seen == nil {
		u.seen = map[string]bool{}
	}
	if !u.seen[s] {
		u.seen[s] = true
		u.list = append(u.list, s)
	}
}

// valueRule emits a schema as a named rule, for use inside objects and
// arrays.
func (e *emitter) valueRule(d dnf, hint string) (string, bool, error) {
	x, ok, err := e.dnf(d)
	if err != nil || !ok {
		return "", ok, err
	}
	if isName(x) {
		return x, true, nil
	}
	return e.rule(hint, x), true, nil
}

func isName(x string) bool {
	for _, r := range x {
		if !isWordChar(r) {
			return false
		}
	}
	return x != ""
}

// ref is the rule a reference's target is emitted as. The body is
// written later, by emitRefs: writing it here would recurse once per link
// of a chain of references, as deep as the schema has definitions.
func (e *emitter) ref(ref, path string) (string, error) {
	if name, ok := e.refRule[ref]; ok {
		return name, nil
	}
	hint := "ref-" + strings.TrimPrefix(ref, "#")
	if ref == "#" {
		hint = "schema"
	}
	name := e.reserve(hint)
	e.refRule[ref] = name
	e.pendingRefs = append(e.pendingRefs, pendingRef{ref: ref, path: path, name: name})
	return name, nil
}

type pendingRef struct{ ref, path, name string }

// emitRefs writes the bodies of the referenced rules, including those
// referenced from the bodies it writes.
func (e *emitter) emitRefs() error {
	for len(e.pendingRefs) > 0 {
		r := e.pendingRefs[0]
		e.pendingRefs = e.pendingRefs[1:]
		d, err := e.cv.refTarget(r.ref, r.path)
		if err != nil {
			return err
		}
		body, ok, err := e.dnf(d)
		if err != nil {
			return err
		}
		if !ok {
			body = never
		}
		e.define(r.name, body)
	}
	return nil
}

func (e *emitter) conj(c *conj) (string, bool, error) {
	if c.ref != "" {
		name, err := e.ref(c.ref, c.path)
		return name, err == nil, err
	}
	if c.isTrue() {
		return e.base("value"), true, nil
	}
	if c.hasEnum {
		return e.enum(c)
	}
	var alts []string
	add := func(x string, ok bool, err error) error {
		if ok {
			alts = append(alts, x)
		}
		return err
	}
	if c.types&tNull != 0 {
		alts = append(alts, `"null"`)
	}
	if c.types&tBool != 0 {
		alts = append(alts, `"true"`, `"false"`)
	}
	if c.types&tNumber != 0 {
		if err := add(e.number(c)); err != nil {
			return "", false, err
		}
	}
	if c.types&tString != 0 {
		if err := add(e.str(c)); err != nil {
			return "", false, err
		}
	}
	if c.types&tArray != 0 {
		if err := add(e.array(c)); err != nil {
			return "", false, err
		}
	}
	if c.types&tObject != 0 {
		if err := add(e.object(c)); err != nil {
			return "", false, err
		}
	}
	return alternation(alts)
}
