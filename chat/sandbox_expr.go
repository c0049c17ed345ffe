package chat

import (
	"sort"
	"strings"
)

// The expression half of the sandbox rewrite: the operators and slices
// that can build more than they are given become calls of the render's
// budget. Each rewrite tokenizes the tag once and splices calls in at the
// operands' edges, found in one pass, so that rewriting costs time linear
// in the tag (a tag is refused beyond Limits.TagBytes before this runs).

// token is one lexical token of tag text: a word or number, a string
// literal, an operator or a bracket.
type token struct {
	text       string
	start, end int
}

// twoCharOps are the operators of two characters; the other operator and
// bracket characters are tokens of their own, and any other character the
// engine's tokenizer skips, as it does whitespace.
var twoCharOps = []string{"**", "//", "==", "!=", "<=", ">="}

const oneCharOps = ",.:()[]{}|~+-*/%<>="

// tokens cuts tag text into tokens as the engine's tokenizer does (a
// token it sees and this did not would escape the rewrite): string
// literals whole, numbers (an integer, or digits.digits with an optional
// exponent), names, operators; other characters are skipped.
func tokens(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == '\'' || c == '"':
			i = min(literalEnd(s, i)+1, len(s))
		case c >= '0' && c <= '9':
			i = numberEnd(s, i)
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case i+1 < len(s) && isTwoCharOp(s[i], s[i+1]):
			i += 2
		case strings.IndexByte(oneCharOps, c) >= 0:
			i++
		default: // whitespace, and what the engine ignores
			i++
			continue
		}
		out = append(out, token{s[start:i], start, i})
	}
	return out
}

func isTwoCharOp(a, b byte) bool {
	for _, op := range twoCharOps {
		if a == op[0] && b == op[1] {
			return true
		}
	}
	return false
}

// numberEnd is the end of the number starting at s[i]: digits, then
// optionally "." and digits and an exponent, as the engine reads them.
func numberEnd(s string, i int) int {
	digits := func() {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	digits()
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		i++
		digits()
		if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
			i++
			if i < len(s) && (s[i] == '+' || s[i] == '-') {
				i++
			}
			digits()
		}
	}
	return i
}

// looser are the operators and words that bind less tightly than * (or
// separate expressions): a * operand never spans one at its own depth.
var looser = map[string]bool{
	"+": true, "-": true, "~": true, "==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true,
	",": true, ":": true, "=": true,
	"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true, "elif": true,
	"recursive": true,
}

func isOpen(t string) bool  { return t == "(" || t == "[" || t == "{" }
func isClose(t string) bool { return t == ")" || t == "]" || t == "}" }

// matches gives, for each opening bracket, the index of the one closing
// it (len(toks) when none does).
func matches(toks []token) []int {
	match := make([]int, len(toks))
	var open []int
	for i, t := range toks {
		match[i] = len(toks)
		switch {
		case isOpen(t.text):
			open = append(open, i)
		case isClose(t.text) && len(open) > 0:
			match[open[len(open)-1]] = i
			open = open[:len(open)-1]
		}
	}
	return match
}

// segmentStarts gives, for each token, the index where the operand chain
// it belongs to starts: just after the last token at its depth for which
// boundary holds, or after the bracket that opens its depth.
func segmentStarts(toks []token, boundary func(string) bool) []int {
	starts := make([]int, len(toks))
	stack := []int{0}
	for i, t := range toks {
		switch {
		case isOpen(t.text):
			starts[i] = stack[len(stack)-1]
			stack = append(stack, i+1)
		case isClose(t.text):
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			starts[i] = stack[len(stack)-1]
		default:
			if boundary(t.text) {
				stack[len(stack)-1] = i + 1
			}
			starts[i] = stack[len(stack)-1]
		}
	}
	return starts
}

// edit is one splice: del bytes at pos replaced by text. At one position
// closing inserts go first (rank 0), then replacements (1), then opening
// inserts (2).
type edit struct {
	pos, rank, del int
	text           string
}

func applyEdits(s string, edits []edit) string {
	sort.SliceStable(edits, func(i, j int) bool {
		if edits[i].pos != edits[j].pos {
			return edits[i].pos < edits[j].pos
		}
		return edits[i].rank < edits[j].rank
	})
	var b strings.Builder
	at := 0
	for _, e := range edits {
		if e.pos < at { // overlapping: cannot happen; keep the text whole
			return s
		}
		b.WriteString(s[at:e.pos])
		b.WriteString(e.text)
		at = e.pos + e.del
	}
	b.WriteString(s[at:])
	return b.String()
}

// callEdits are the splices that turn toks[from:to] with the operator at
// toks[at] into call(left, right).
func callEdits(toks []token, from, at, to int, call string) []edit {
	return []edit{
		{pos: toks[from].start, rank: 2, text: call + "("},
		{pos: toks[at-1].end, rank: 1, del: toks[at+1].start - toks[at-1].end, text: ", "},
		{pos: toks[to-1].end, rank: 0, text: ")"},
	}
}

// rewriteArith points the operators that can build a larger value than
// their operands at the sized calls: *, then + (and the - of its level
// stays inside its operands), then ~, the tighter level first so that each
// pass sees it as calls already.
func rewriteArith(s string) string {
	s = rewriteMul(s)
	s = rewriteChain(s, "+", addCall)
	return rewriteChain(s, "~", catCall)
}

// rewriteMul turns every a * b into _sf_mul(a, b), keeping the engine's
// precedence: the left operand runs back to the last looser operator at
// its depth (a / b * c is _sf_mul(a / b, c), and chains nest left first),
// the right one is a power of signed, postfixed atoms (filters included).
// A * missing an operand is left for the engine to refuse.
func rewriteMul(s string) string {
	if !strings.Contains(s, "*") {
		return s
	}
	toks := tokens(s)
	match := matches(toks)
	starts := segmentStarts(toks, func(t string) bool { return looser[t] })
	var edits []edit
	for at, t := range toks {
		if t.text != "*" {
			continue
		}
		from, to := starts[at], mulRight(toks, match, at)
		if from >= at || to <= at+1 {
			continue
		}
		edits = append(edits, callEdits(toks, from, at, to, mulCall)...)
	}
	return applyEdits(s, edits)
}

// mulRight is the index just past the right operand of the * at toks[at]:
// signs, an atom, its postfixes (.name, calls, subscripts, filters with
// their arguments), and once more after a **.
func mulRight(toks []token, match []int, at int) int {
	i := at + 1
	operand := func() bool {
		for i < len(toks) && (toks[i].text == "-" || toks[i].text == "+") {
			i++
		}
		if i >= len(toks) {
			return false
		}
		switch t := toks[i].text; {
		case isOpen(t):
			i = match[i] + 1
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
				i = match[i] + 1
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
	return min(i, len(toks))
}

// rewriteChain turns every a op b into call(a, b) for op + or ~. The left
// operand runs back to the last operator looser than op's level at its
// depth; the right one on to the next operator of op's level or looser
// (for ~, + and - are tighter and belong to it); a sign where an operand
// is expected is unary. An operator missing an operand is left alone.
func rewriteChain(s, op, call string) string {
	if !strings.Contains(s, op) {
		return s
	}
	level := map[string]bool{op: true}
	if op == "+" {
		level["-"] = true
	} else {
		level["+"], level["-"] = true, true // tighter than ~: inside its operands
	}
	ends := func(t string) bool { return looser[t] && !(op == "~" && (t == "+" || t == "-")) }
	toks := tokens(s)
	match := matches(toks)
	starts := segmentStarts(toks, func(t string) bool { return looser[t] && !level[t] })
	var edits []edit
	for at, t := range toks {
		if t.text != op {
			continue
		}
		from, to, operand := starts[at], at+1, false
	right:
		for to < len(toks) {
			switch t := toks[to].text; {
			case isOpen(t):
				to, operand = match[to]+1, true
				continue
			case isClose(t):
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
		to = min(to, len(toks))
		if from >= at || !operand {
			continue
		}
		edits = append(edits, callEdits(toks, from, at, to, call)...)
	}
	return applyEdits(s, edits)
}

// rewriteSlices turns every subscript slice x[a:b:c] into
// x|_sf_slice('mask', a, b, c), the mask saying which of the three parts
// are written. The engine's slicing walks every index from start to stop
// unclamped, and sizes its result by that distance, so a slice such as
// x[:10**12:2] would hang or exhaust memory; the call walks only the
// indices that fall inside x.
func rewriteSlices(s string) string {
	if !strings.Contains(s, ":") {
		return s
	}
	toks := tokens(s)
	match := matches(toks)
	var edits []edit
	for open, t := range toks {
		if t.text != "[" || open == 0 || !endsOperand(toks[open-1].text) || match[open] >= len(toks) {
			continue
		}
		end := match[open]
		var colons []int
		for j := open + 1; j < end; j++ {
			switch {
			case isOpen(toks[j].text):
				j = match[j]
			case toks[j].text == ":":
				colons = append(colons, j)
			}
		}
		if len(colons) == 0 || len(colons) > 2 {
			continue
		}
		bounds := append(append([]int{open}, colons...), end)
		mask := ""
		for k := 0; k+1 < len(bounds); k++ {
			if bounds[k]+1 == bounds[k+1] {
				mask += "0"
				continue
			}
			mask += "1"
			edits = append(edits, edit{pos: toks[bounds[k]+1].start, rank: 2, text: ", "})
		}
		edits = append(edits, edit{pos: t.start, rank: 1, del: 1, text: "|" + sliceCall + "('" + mask + "'"})
		for _, c := range colons {
			edits = append(edits, edit{pos: toks[c].start, rank: 1, del: 1})
		}
		edits = append(edits, edit{pos: toks[end].start, rank: 1, del: 1, text: ")"})
	}
	return applyEdits(s, edits)
}

// endsOperand says whether a token can end an operand, so that a "[" after
// it is a subscript rather than a list.
func endsOperand(t string) bool {
	return isClose(t) || t[0] == '\'' || t[0] == '"' || isIdent(t[0]) && !looser[t]
}
