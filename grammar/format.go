package grammar

import (
	"sort"
	"strings"
)

// formatRules are the string formats the converter enforces, as GBNF over
// the string's JSON text (all ASCII; a quote or backslash in an email's
// quoted local part appears escaped). Each is the body of rule fmt-<name>;
// the rules they share are in formatHelpers.
//
//   - date, time, date-time: RFC 3339 (days per month and leap years exact;
//     "T" and "Z" in either case). A leap second (:60) is admitted only as
//     23:59:60 in UTC (Z or ±00:00): a leap second at another offset would
//     need the offset arithmetic spelled out and is refused.
//   - uuid: RFC 4122 text, 8-4-4-4-12 hex digits, either case.
//   - email: dot-atom or quoted local part @ a domain name or [IPv4]; no
//     IPv6 literals, no comments.
//   - ipv4: dotted quad, no leading zeros.
var formatRules = map[string]string{
	"date":      `fmt-year "-" ( "0" [13578] "-" fmt-d31 | "1" [02] "-" fmt-d31 | "0" [469] "-" fmt-d30 | "11-" fmt-d30 | "02-" fmt-d28 ) | fmt-leap-year "-02-29"`,
	"time":      `fmt-hms ( "." [0-9]+ )? fmt-offset | "23:59:60" ( "." [0-9]+ )? ( [zZ] | [+-] "00:00" )`,
	"date-time": `fmt-date [tT] fmt-time`,
	"uuid":      `fmt-hex{8} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{12}`,
	"email":     `fmt-local "@" ( fmt-label ( "." fmt-label )* | "[" fmt-ipv4 "]" )`,
	"ipv4":      `fmt-ipv4`,
}

var formatHelpers = map[string]string{
	"fmt-year":      `[0-9]{4}`,
	"fmt-leap-year": `[0-9] [0-9] ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [048] | [2468] [048] | [13579] [26] ) "00"`,
	"fmt-d31":       `"0" [1-9] | [12] [0-9] | "3" [01]`,
	"fmt-d30":       `"0" [1-9] | [12] [0-9] | "30"`,
	"fmt-d28":       `"0" [1-9] | "1" [0-9] | "2" [0-8]`,
	"fmt-hms":       `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9]`,
	"fmt-offset":    `[zZ] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9]`,
	"fmt-hex":       `[0-9a-fA-F]`,
	"fmt-local":     `fmt-atom ( "." fmt-atom )* | "\\\"" ( [ !#-\[\]-~] | "\\\\" ( [ !#-\[\]-~] | "\\\"" | "\\\\" ) )* "\\\""`,
	"fmt-atom":      "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+",
	"fmt-label":     `[A-Za-z0-9] ( [A-Za-z0-9\-]* [A-Za-z0-9] )?`,
	"fmt-ipv4":      `fmt-octet "." fmt-octet "." fmt-octet "." fmt-octet`,
	"fmt-octet":     `"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]`,
}

func supportedFormats() string {
	names := make([]string, 0, len(formatRules))
	for n := range formatRules {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// format emits the rule of a format (fmt-<name>) and the rules it uses.
func (e *emitter) format(name string) string {
	rule := "fmt-" + name
	e.defineOnce(rule)
	return rule
}

func formatBody(rule string) (string, bool) {
	if body, ok := formatHelpers[rule]; ok {
		return body, true
	}
	body, ok := formatRules[strings.TrimPrefix(rule, "fmt-")]
	return body, ok && strings.HasPrefix(rule, "fmt-")
}

// defineOnce defines a fixed-name rule and, first, the helpers its body
// names.
func (e *emitter) defineOnce(name string) {
	if _, ok := e.bodies[name]; ok {
		return
	}
	body, _ := formatBody(name)
	e.bodies[name] = body
	e.order = append(e.order, name)
	for _, tok := range strings.Fields(body) {
		tok = strings.TrimRight(tok, "*+?)")
		if i := strings.IndexByte(tok, '{'); i > 0 {
			tok = tok[:i]
		}
		if _, ok := formatBody(tok); ok {
			e.defineOnce(tok)
		}
	}
}
