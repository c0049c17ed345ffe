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
		if p.kind != '%' {
			if bracketDepth(p.inner) > lim.Nesting {
				return nil, &BoundError{Bound: BoundNesting, Limit: int64(lim.Nesting)}
			}
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
		if bracketDepth(p.inner) > lim.Nesting {
			return nil, &BoundError{Bound: BoundNesting, Limit: int64(lim.Nesting)}
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

// bracketDepth is the deepest nesting of brackets in a tag, outside
// string literals.
func bracketDepth(inner string) int {
	depth, deepest := 0, 0
	for _, t := range tokens(inner) {
		switch t.text {
		case "(", "[", "{":
			depth++
			deepest = max(deepest, depth)
		case ")", "]", "}":
			depth--
		}
	}
	return deepest
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

// token is one lexical token of tag text: a word or number, a string
// literal, an operator or a bracket.
type token struct {
	text       string
	start, end int
}

// twoCharOps are the operators of two characters; every other operator
// character is a token of its own.
var twoCharOps = []string{"**", "//", "==", "!=", "<=", ">="}

// tokens cuts tag text into tokens, string literals whole.
func tokens(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '\'' || c == '"':
			end := min(literalEnd(s, i)+1, len(s))
			out = append(out, token{s[i:end], i, end})
			i = end
			continue
		case isIdent(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			out = append(out, token{s[i:j], i, j})
			i = j
			continue
		}
		n := 1
		for _, op := range twoCharOps {
			if strings.HasPrefix(s[i:], op) {
				n = 2
				break
			}
		}
		out = append(out, token{s[i : i+n], i, i + n})
		i += n
	}
	return out
}

// looser are the operators and words that bind less tightly than * (or
// separate expressions): a * operand never spans one at its own depth.
var looser = map[string]bool{
	"+": true, "-": true, "~": true, "==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true,
	",": true, ":": true, "=": true,
	"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true, "elif": true,
	"recursive": true,
}

// mulLevel are the operators of *'s own level, left-associative.
var mulLevel = map[string]bool{"*": true, "/": true, "//": true, "%": true}

// rewriteArith points the operators that can build a larger value than
// their operands at the sized calls: *, then +, then ~, innermost level
// first so that each pass sees the tighter ones as calls already.
func rewriteArith(s string) string {
	s = rewriteMul(s)
	s = rewriteChain(s, "+", addCall, map[string]bool{"+": true, "-": true})
	return rewriteChain(s, "~", catCall, map[string]bool{"+": true, "-": true, "~": true})
}

// rewriteChain turns every a op b of tag text into call(a, b), for an
// operator of the additive or concatenation level; tighter lists the
// operators of that level and tighter ones among those looser than *.
// The left operand runs back to the last looser operator at its depth (so
// chains nest as the engine groups them, left first), the right one on to
// the next operator of its level or looser; a sign where an operand is
// expected is unary and stays inside.
func rewriteChain(s, op, call string, tighter map[string]bool) string {
	// The right operand ends at an operator of op's level or looser; for ~
	// the additive operators are tighter and belong to it.
	ends := func(t string) bool { return looser[t] && !(op == "~" && (t == "+" || t == "-")) }
	skip := 0 // an operator missing an operand is left for the engine to refuse
	for range strings.Count(s, op) {
		toks := tokens(s)
		at, seen := -1, 0
		for i, t := range toks {
			if t.text == op {
				if seen == skip {
					at = i
					break
				}
				seen++
			}
		}
		if at < 0 {
			return s
		}
		from := at - 1
		depth := 0
	left:
		for ; from >= 0; from-- {
			switch t := toks[from].text; {
			case t == ")" || t == "]" || t == "}":
				depth++
			case t == "(" || t == "[" || t == "{":
				if depth == 0 {
					break left
				}
				depth--
			case depth == 0 && looser[t] && !tighter[t]:
				break left
			}
		}
		from++
		to, operand := at+1, false
	right:
		for to < len(toks) {
			switch t := toks[to].text; {
			case t == "(" || t == "[" || t == "{":
				to, operand = closing(toks, to), true
				continue
			case t == ")" || t == "]" || t == "}":
				break right
			case (t == "-" || t == "+") && !operand: // a sign
			case ends(t):
				break right
			case isIdent(t[0]) || t[0] == '\'' || t[0] == '"':
				operand = true
			default:
				operand = false
			}
			to++
		}
		if from == at || !operand {
			skip++
			continue
		}
		l, r := s[toks[from].start:toks[at].start], s[toks[at+1].start:toks[to-1].end]
		s = s[:toks[from].start] + call + "(" + strings.TrimSpace(l) + ", " + r + ")" + s[toks[to-1].end:]
	}
	return s
}

// rewriteMul turns every a * b of tag text into _sf_mul(a, b), keeping the
// engine's precedence: the left operand runs back to the last looser
// operator at its depth (so a / b * c is _sf_mul(a / b, c)), the right
// one is a power of unary, postfixed atoms (filters included). Each pass
// rewrites the first * left, so chains nest as the engine groups them.
func rewriteMul(s string) string {
	skip := 0 // a * missing an operand is left for the engine to refuse
	for range strings.Count(s, "*") {
		toks := tokens(s)
		at, seen := -1, 0
		for i, t := range toks {
			if t.text == "*" {
				if seen == skip {
					at = i
					break
				}
				seen++
			}
		}
		if at < 0 {
			return s
		}
		from, to := mulLeft(toks, at), mulRight(toks, at)
		if from == at || to == at+1 {
			skip++
			continue
		}
		l, r := s[toks[from].start:toks[at].start], s[toks[at+1].start:toks[to-1].end]
		s = s[:toks[from].start] + mulCall + "(" + strings.TrimSpace(l) + ", " + r + ")" + s[toks[to-1].end:]
	}
	return s
}

// mulLeft is the index of the first token of the left operand of the *
// at toks[at].
func mulLeft(toks []token, at int) int {
	depth := 0
	i := at - 1
	for ; i >= 0; i-- {
		switch t := toks[i].text; {
		case t == ")" || t == "]" || t == "}":
			depth++
		case t == "(" || t == "[" || t == "{":
			if depth == 0 {
				return i + 1
			}
			depth--
		case depth == 0 && looser[t]:
			return i + 1
		}
	}
	return 0
}

// mulRight is the index just past the right operand of the * at toks[at]:
// unary signs, an atom, its postfixes (.name, calls, subscripts, filters
// with their arguments), and once more after a **.
func mulRight(toks []token, at int) int {
	i := at + 1
	operand := func() bool {
		for i < len(toks) && (toks[i].text == "-" || toks[i].text == "+") {
			i++
		}
		if i >= len(toks) {
			return false
		}
		switch t := toks[i].text; {
		case t == "(" || t == "[" || t == "{":
			i = closing(toks, i)
		case isIdent(t[0]) || t[0] == '\'' || t[0] == '"':
			i++
		default:
			return false
		}
		for i < len(toks) {
			switch toks[i].text {
			case ".", "|":
				i++
				if i < len(toks) && isIdent(toks[i].text[0]) {
					i++
				}
			case "(", "[":
				i = closing(toks, i)
			default:
				return true
			}
		}
		return true
	}
	if !operand() {
		return at + 1
	}
	if i < len(toks) && toks[i].text == "**" {
		i++
		operand()
	}
	return i
}

// closing is the index just past the bracket that closes toks[open], or
// len(toks) when none does.
func closing(toks []token, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch toks[i].text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return len(toks)
}

// rewriteSlices turns every subscript slice x[a:b:c] of tag text into
// x|_sf_slice('mask', a, b, c), the mask saying which of the three parts
// are written. The engine's slicing walks every index from start to stop
// unclamped, and sizes its result by that distance, so a slice such as
// x[:10**12:2] would hang or exhaust memory; the call walks only the
// indices that fall inside x.
func rewriteSlices(s string) string {
	for range strings.Count(s, ":") {
		toks := tokens(s)
		open, close := -1, -1
		var colons []int
		for i, t := range toks {
			if t.text != "[" || i == 0 || !endsOperand(toks[i-1].text) {
				continue
			}
			end := closing(toks, i) - 1
			if end >= len(toks) || toks[end].text != "]" {
				continue
			}
			colons = colons[:0]
			depth := 0
			for j := i + 1; j < end; j++ {
				switch toks[j].text {
				case "(", "[", "{":
					depth++
				case ")", "]", "}":
					depth--
				case ":":
					if depth == 0 {
						colons = append(colons, j)
					}
				}
			}
			if len(colons) == 1 || len(colons) == 2 {
				open, close = i, end
				break
			}
		}
		if open < 0 {
			return s
		}
		bounds := append(append([]int{open}, colons...), close)
		mask, args := "", []string{}
		for k := 0; k+1 < len(bounds); k++ {
			part := strings.TrimSpace(s[toks[bounds[k]].end:toks[bounds[k+1]].start])
			if part == "" {
				mask += "0"
				continue
			}
			mask += "1"
			args = append(args, part)
		}
		call := "|" + sliceCall + "('" + mask + "'"
		for _, a := range args {
			call += ", " + a
		}
		s = s[:toks[open].start] + call + ")" + s[toks[close].end:]
	}
	return s
}

// endsOperand says whether a token can end an operand, so that a "[" after
// it is a subscript rather than a list.
func endsOperand(t string) bool {
	return t == ")" || t == "]" || t == "}" || t[0] == '\'' || t[0] == '"' || isIdent(t[0]) && !looser[t]
}
