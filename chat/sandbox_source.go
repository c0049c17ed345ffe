package chat

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// The sandbox's half in the template text. The engine has no hooks of its
// own, so before compiling, the source is cut into tags exactly as the
// engine's scanner cuts it (a tag this package did not see would run
// uncounted), checked against the static bounds, and rewritten so that
// every render reports to its budget (sandbox_calls.go):
//
//   - every loop, macro and call-block body opens with {{ _sf_body(n, …) }}
//     (n: the body's literal text; …: the loop variables or parameters);
//     an expression tag is used because it takes no part in trimming, so
//     the output is unchanged;
//   - {{ x }} prints (x)|_sf_print, and {% set a = x %} stores (x)|_sf_set;
//   - a * b becomes _sf_mul(a, b), and join, replace, indent and the
//     string methods replace and format are pointed at sized versions.

// piece is one segment of template source as the engine's scanner sees it:
// text, or a tag with its inner text and trim markers.
type piece struct {
	kind        byte // 't' text, '{' expression, '%' statement, '#' comment
	inner       string
	left, right bool // the tag's "-" trim markers
	closed      bool // false: a tag running to the end of the source
}

// scanPieces cuts src as the engine's scanner does: a tag opens at "{{",
// "{%" or "{#", an optional "-" after the opener marks left trimming, and
// it closes at the first "}}", "%}" or "#}" (with an optional "-" before)
// outside a quoted string; comments have no strings.
func scanPieces(src string) []piece {
	var out []piece
	for len(src) > 0 {
		open := strings.IndexByte(src, '{')
		for open >= 0 && (open+1 >= len(src) || !strings.ContainsRune("{%#", rune(src[open+1]))) {
			next := strings.IndexByte(src[open+1:], '{')
			if next < 0 {
				open = -1
				break
			}
			open += 1 + next
		}
		if open < 0 {
			out = append(out, piece{kind: 't', inner: src})
			break
		}
		if open > 0 {
			out = append(out, piece{kind: 't', inner: src[:open]})
		}
		kind := src[open+1]
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[kind]
		src = src[open+2:]
		p := piece{kind: kind}
		if strings.HasPrefix(src, "-") {
			p.left, src = true, src[1:]
		}
		i := 0
		for i < len(src) {
			c := src[i]
			if kind != '#' && (c == '\'' || c == '"') {
				i++
				for i < len(src) && src[i] != c {
					if src[i] == '\\' && i+1 < len(src) {
						i++
					}
					i++
				}
				i++
				continue
			}
			if c == '-' && strings.HasPrefix(src[i+1:], closer) {
				p.right, p.closed = true, true
				break
			}
			if strings.HasPrefix(src[i:], closer) {
				p.closed = true
				break
			}
			i++
		}
		i = min(i, len(src))
		p.inner = src[:i]
		out = append(out, p)
		if !p.closed {
			break
		}
		if p.right {
			i++
		}
		src = src[i+2:]
	}
	return out
}

// sanitizeCode turns every character of the code in {{ }} and {% %} tags
// (outside raw blocks and string literals) that the engine's tokenizer
// skips into a space, which it skips alike: the rewrite's own tokenizer
// and patterns then see the tokens the engine sees, with no stray byte
// hiding an operator or a filter name from them ("| join" written with a
// control character in place of the space).
func sanitizeCode(pieces []piece) {
	inRaw := false
	for i, p := range pieces {
		if p.kind == 't' || p.kind == '#' {
			continue
		}
		kw := keyword(p.inner)
		if inRaw {
			inRaw = !(p.kind == '%' && kw == "endraw")
			continue
		}
		inRaw = p.kind == '%' && kw == "raw"
		b := []byte(p.inner)
		for j := 0; j < len(b); j++ {
			switch c := b[j]; {
			case c == '\'' || c == '"':
				j = literalEnd(p.inner, j)
			case c == ' ' || c == '\t' || c == '\n' || c == '\r' || isIdent(c) || strings.IndexByte(oneCharOps, c) >= 0:
			case c == '!' && j+1 < len(b) && b[j+1] == '=':
			default:
				b[j] = ' '
			}
		}
		pieces[i].inner = string(b)
	}
}

// tag writes p back with inner in place of its own text.
func (p piece) tag(b *strings.Builder, inner string) {
	b.WriteByte('{')
	b.WriteByte(p.kind)
	if p.left {
		b.WriteByte('-')
	}
	b.WriteString(inner)
	if !p.closed {
		return
	}
	if p.right {
		b.WriteByte('-')
	}
	b.WriteString(map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[p.kind])
}

// keyword is a statement's keyword, as the engine reads it.
func keyword(inner string) string {
	s := strings.TrimSpace(inner)
	for i, r := range s {
		if !unicode.IsLetter(r) && r != '_' {
			return s[:i]
		}
	}
	return s
}

// opens and closes say which statements open and close a block.
var (
	opens  = map[string]bool{"if": true, "for": true, "macro": true, "call": true, "filter": true}
	closes = map[string]bool{"endif": true, "endfor": true, "endmacro": true, "endcall": true, "endfilter": true, "endset": true}
)

// isBlockSet is a {% set x %}…{% endset %}: the engine takes a set without
// any "=" for one.
func isBlockSet(inner string) bool { return keyword(inner) == "set" && !strings.Contains(inner, "=") }

// checkSource applies the static bounds to the scanned source and returns,
// for each piece opening a loop, macro or call block, the literal text its
// body holds (nested bodies included), which a run of the body may write.
func checkSource(pieces []piece, lim *Limits) (map[int]int, error) {
	type open struct{ at, text int }
	var stack []open
	bodyText := map[int]int{}
	inRaw := false
	for i, p := range pieces {
		if p.kind == 't' {
			for j := range stack {
				stack[j].text += len(p.inner)
			}
			continue
		}
		if len(p.inner) > lim.TagBytes {
			return nil, &BoundError{Bound: BoundTagBytes, Limit: int64(lim.TagBytes)}
		}
		if p.kind == '#' || inRaw && keyword(p.inner) != "endraw" {
			continue
		}
		if err := checkNames(p.inner); err != nil {
			return nil, err
		}
		depth, ops := exprShape(p.inner)
		switch {
		case depth > lim.Nesting:
			return nil, &BoundError{Bound: BoundNesting, Limit: int64(lim.Nesting)}
		case ops > lim.Operators:
			return nil, &BoundError{Bound: BoundOperators, Limit: int64(lim.Operators)}
		}
		if p.kind != '%' {
			continue
		}
		kw := keyword(p.inner)
		switch {
		case inRaw:
			inRaw = kw != "endraw"
			continue
		case kw == "raw":
			inRaw = true
			continue
		}
		switch {
		case opens[kw] || isBlockSet(p.inner):
			if stack = append(stack, open{at: i}); len(stack) > lim.Nesting {
				return nil, &BoundError{Bound: BoundNesting, Limit: int64(lim.Nesting)}
			}
		case closes[kw] && len(stack) > 0:
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			bodyText[top.at] = top.text
		}
	}
	for _, o := range stack { // unclosed: the engine refuses it anyway
		bodyText[o.at] = o.text
	}
	return bodyText, nil
}

// reservedPrefix starts the names of the sandbox's calls; a template
// defining one (a macro _sf_body) would take the place of the call.
const reservedPrefix = "_sf_"

// checkNames refuses a tag the rewrite could not make safe: one using a
// reserved name, or taking a sized string method without calling it (the
// rewrite replaces calls, so a method taken as a value would run unsized).
func checkNames(inner string) error {
	toks := tokens(inner)
	for i, t := range toks {
		switch {
		case strings.HasPrefix(t.text, reservedPrefix):
			return &BoundError{Bound: BoundSandbox, Detail: "the name " + t.text + " is reserved"}
		case (t.text == "replace" || t.text == "format") && i > 0 && toks[i-1].text == "." && (i+1 == len(toks) || toks[i+1].text != "("):
			return &BoundError{Bound: BoundSandbox, Detail: "the string method " + t.text + " is taken without being called"}
		}
	}
	return nil
}

// exprShape measures a tag: the deepest nesting of its brackets and the
// number of its operators and brackets, outside string literals.
func exprShape(inner string) (depth, ops int) {
	d := 0
	for _, t := range tokens(inner) {
		switch t.text {
		case "(", "[", "{":
			d++
			depth = max(depth, d)
			ops++
		case ")", "]", "}":
			d--
		case "+", "-", "*", "/", "//", "%", "**", "~":
			ops++
		}
	}
	return depth, ops
}

// rewriteSource rewrites the scanned source for the sandbox (see the top
// of this file); bodyText is checkSource's.
func rewriteSource(pieces []piece, bodyText map[int]int) string {
	var b strings.Builder
	inRaw := false
	for i, p := range pieces {
		switch {
		case p.kind == 't':
			b.WriteString(p.inner)
			continue
		case p.kind == '#' || !p.closed:
			p.tag(&b, p.inner)
			continue
		case inRaw:
			inRaw = !(p.kind == '%' && keyword(p.inner) == "endraw")
			p.tag(&b, p.inner)
			continue
		case p.kind == '{':
			if strings.TrimSpace(p.inner) == "" {
				p.tag(&b, p.inner)
				continue
			}
			p.tag(&b, " ("+renameInExpr(p.inner)+")|"+printCall+" ")
			continue
		}
		kw := keyword(p.inner)
		switch kw {
		case "raw":
			inRaw = true
			p.tag(&b, p.inner)
		case "set":
			p.tag(&b, rewriteSet(p.inner))
		case "for", "macro", "call":
			p.tag(&b, renameInExpr(p.inner))
			args := append([]string{strconv.Itoa(bodyText[i])}, bodyVars(kw, p.inner)...)
			b.WriteString("{{ " + bodyCall + "(" + strings.Join(args, ", ") + ") }}")
		default:
			p.tag(&b, renameInExpr(p.inner))
		}
	}
	return b.String()
}

// rewriteSet checks the value of an inline set as it is stored; the
// engine splits the tag at its first "=", and so does this.
func rewriteSet(inner string) string {
	target, value, ok := strings.Cut(inner, "=")
	if !ok || strings.TrimSpace(value) == "" {
		return renameInExpr(inner)
	}
	// Setting an attribute is the one way to make a value contain itself
	// (ns.x = ns): the owner goes along, so that the check can refuse it.
	owner := ""
	if ns, _, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(target), "set")), "."); ok {
		owner = "(" + strings.TrimSpace(ns) + ")"
	}
	return target + "= (" + renameInExpr(value) + ")|" + setCall + owner + " "
}

var (
	forVars   = regexp.MustCompile(`^\s*for\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s+in\b`)
	macroHead = regexp.MustCompile(`^\s*macro\s+[A-Za-z_][A-Za-z0-9_]*\s*\(`)
	callHead  = regexp.MustCompile(`^\s*call\s*\(`)
	paramName = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=|$)`)
)

// bodyVars names the values a body is handed: a loop's variables, a
// macro's parameters, a call block's caller parameters.
func bodyVars(kw, inner string) []string {
	switch kw {
	case "for":
		m := forVars.FindStringSubmatch(inner)
		if m == nil {
			return nil
		}
		var names []string
		for _, n := range strings.Split(m[1], ",") {
			names = append(names, strings.TrimSpace(n))
		}
		return names
	case "macro", "call":
		head := macroHead
		if kw == "call" {
			head = callHead
		}
		loc := head.FindStringIndex(inner)
		if loc == nil {
			return nil
		}
		return paramNames(inner[loc[1]:])
	}
	return nil
}

// paramNames reads the parameter names of a parameter list that starts
// right after its "(": each top-level item is a name, with an optional
// default after "=".
func paramNames(list string) []string {
	var names []string
	depth, start := 0, 0
	toks := tokens(list)
	for _, t := range toks {
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth == 0 {
				if m := paramName.FindStringSubmatch(list[start:t.start]); m != nil {
					names = append(names, m[1])
				}
				return names
			}
			depth--
		case ",":
			if depth == 0 {
				if m := paramName.FindStringSubmatch(list[start:t.start]); m != nil {
					names = append(names, m[1])
				}
				start = t.end
			}
		}
	}
	return names
}
