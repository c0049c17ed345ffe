package chat

import (
	"regexp"
	"strings"
)

// newlines maps every line ending to "\n".
var newlines = strings.NewReplacer("\r\n", "\n", "\r", "\n")

// prepareSource turns template text into what the engine compiles: it
// does what Jinja's lexer does before reading a template and the engine
// leaves out (line endings become "\n", a single trailing newline is
// dropped, as with keep_trailing_newline off in transformers; templates
// stored in tokenizer_config.json often end in a newline that would
// otherwise reach the prompt), checks the static bounds, points the filters
// the engine gets wrong at ours and adds the sandbox's calls
// (sandbox_source.go).
func prepareSource(src string, lim *Limits) (string, error) {
	if len(src) > lim.SourceBytes {
		return "", &BoundError{Bound: BoundSourceBytes, Limit: int64(lim.SourceBytes)}
	}
	if strings.Contains(src, "\r") {
		src = newlines.Replace(src)
	}
	pieces := scanPieces(strings.TrimSuffix(src, "\n"))
	sanitizeCode(pieces)
	bodyText, err := checkSource(pieces, lim)
	if err != nil {
		return "", err
	}
	return rewriteSource(pieces, bodyText), nil
}

// ownFilters are the filters rendered by this package rather than the
// engine, under the names the rewritten template calls them by. The engine
// looks a filter it lacks up among the template's variables, so renaming
// `x | tojson(...)` to `x | _sf_tojson(...)` inside tags is all it takes.
var ownFilters = map[string]string{"tojson": tojsonFilterName, "join": joinFilter, "replace": replaceCall, "indent": indentFilter, "string": stringFilter}

// Names of the filters the rewrites below insert; they are template
// variables too (see globals).
const (
	unsafeFilter   = "_sf_unsafe"
	iterableFilter = "_sf_iterable"
)

// mutators are the methods transformers' ImmutableSandboxedEnvironment
// refuses on lists, dicts and sets; no other value a template meets has
// methods of these names. The engine runs them, so a call `x.append(y)` is
// rewritten to `x|_sf_unsafe('append', y)`, which refuses as the sandbox
// does.
var mutatorCall = regexp.MustCompile(`\.\s*(append|extend|insert|pop|remove|clear|sort|reverse|update|setdefault|popitem|add|discard|difference_update|intersection_update|symmetric_difference_update)\s*\(\s*(\))?`)

// sizedMethod matches a call of a string method whose result can be far
// larger than its arguments; it is rewritten to the sized filter of the
// same arguments, `s.replace(a, b)` to `s|_sf_replace(a, b)`.
var sizedMethod = regexp.MustCompile(`\.\s*(replace|format)\s*\(`)

// filterUse matches a filter application: the bar, spaces, and the name.
var filterUse = regexp.MustCompile(`\|\s*([A-Za-z_][A-Za-z0-9_]*)\b`)

// literalEnd is the index of the quote closing the string literal that
// opens at s[i] (backslash escapes skipped), or len(s) when it never closes.
func literalEnd(s string, i int) int {
	quote := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case quote:
			return j
		}
	}
	return len(s)
}

// renameInExpr rewrites one tag's text: the iterable of a for loop is
// checked (rewriteFor), and in the code outside string literals own
// filters are renamed and mutating method calls refused.
func renameInExpr(tag string) string {
	tag = rewriteArith(rewriteSlices(rewriteFor(tag)))
	var b strings.Builder
	for _, seg := range splitStrings(tag) {
		if seg.literal {
			b.WriteString(seg.text)
			continue
		}
		code := filterUse.ReplaceAllStringFunc(seg.text, func(m string) string {
			name := filterUse.FindStringSubmatch(m)[1]
			if own, ok := ownFilters[name]; ok {
				return strings.TrimSuffix(m, name) + own
			}
			return m
		})
		code = mutatorCall.ReplaceAllStringFunc(code, func(m string) string {
			sub := mutatorCall.FindStringSubmatch(m)
			if sub[2] != "" {
				return "|" + unsafeFilter + "('" + sub[1] + "')"
			}
			return "|" + unsafeFilter + "('" + sub[1] + "', "
		})
		code = sizedMethod.ReplaceAllString(code, "|_sf_$1(")
		b.WriteString(code)
	}
	return b.String()
}

type segment struct {
	text    string
	literal bool // a quoted string, quotes included
}

// splitStrings cuts tag text into code and string literals.
func splitStrings(tag string) []segment {
	var segs []segment
	start := 0
	for i := 0; i < len(tag); i++ {
		if c := tag[i]; c == '\'' || c == '"' {
			end := literalEnd(tag, i)
			segs = append(segs, segment{tag[start:i], false}, segment{tag[i:min(end+1, len(tag))], true})
			start, i = min(end+1, len(tag)), end
		}
	}
	if start < len(tag) {
		segs = append(segs, segment{tag[start:], false})
	}
	return segs
}

// forHead matches the start of a for tag up to its iterable.
var forHead = regexp.MustCompile(`^([-+]?\s*for\s+[A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*\s+in\s+)`)

// rewriteFor wraps a for loop's iterable in the filter that refuses what
// Python cannot iterate (none, numbers): the engine loops over none as over
// an empty list, where the reference raises "'NoneType' object is not
// iterable". The iterable ends at the loop's own top-level `if` or
// `recursive`, or at the tag's end.
func rewriteFor(tag string) string {
	head := forHead.FindString(tag)
	if head == "" {
		return tag
	}
	rest := tag[len(head):]
	end := len(rest)
	depth := 0
	for i := 0; i < len(rest) && end == len(rest); i++ {
		c := rest[i]
		switch {
		case c == '\'' || c == '"':
			i = literalEnd(rest, i)
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth == 0 && (keywordAt(rest, i, "if") || keywordAt(rest, i, "recursive")):
			end = i
		}
	}
	iter := strings.TrimRight(rest[:end], " \t\n")
	trail := rest[len(iter):end]
	if strings.HasSuffix(iter, "-") || strings.HasSuffix(iter, "+") { // whitespace control before %}
		if end == len(rest) {
			trail = iter[len(iter)-1:] + trail
			iter = strings.TrimRight(iter[:len(iter)-1], " \t\n")
		}
	}
	if iter == "" {
		return tag
	}
	return head + "(" + iter + ")|" + iterableFilter + trail + rest[end:]
}

// keywordAt reports whether the word kw stands alone at s[i:].
func keywordAt(s string, i int, kw string) bool {
	if !strings.HasPrefix(s[i:], kw) || (i > 0 && isIdent(s[i-1])) {
		return false
	}
	j := i + len(kw)
	return j == len(s) || !isIdent(s[j])
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
