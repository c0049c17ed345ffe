package grammar

import (
	"strconv"
	"strings"
)

// The hostile inputs of issue 21, reproduced against the server: each is
// small to send and used to cost seconds to minutes and gigabytes.

// deepGBNF is root ::= ((((…"a"…)))) nested depth groups deep (two bytes
// a level: 60,000 levels is about 120 KB).
func deepGBNF(depth int) string {
	return "root ::= " + strings.Repeat("(", depth) + `"a"` + strings.Repeat(")", depth) + "\n"
}

// chainGBNF is a chain of n rules, each the next one, the last nullable:
// rules defined in order, so a fixed point that marks one nullable rule a
// pass needs n passes. Names are four characters and the rules unspaced,
// so 80,000 rules stay under a megabyte.
func chainGBNF(n int) string {
	const first, rest = "abcdefghijklmnop", "abcdefghijklmnopqrstuvwxyz0123456789"
	name := func(i int) string {
		b := make([]byte, 4)
		for k := 3; k >= 1; k-- {
			b[k] = rest[i%len(rest)]
			i /= len(rest)
		}
		b[0] = first[i%len(first)]
		return string(b)
	}
	var b strings.Builder
	b.WriteString("root::=" + name(0) + "\"x\"\n")
	for i := 0; i < n-1; i++ {
		b.WriteString(name(i) + "::=" + name(i+1) + "\n")
	}
	b.WriteString(name(n-1) + "::=\"\"\n")
	return b.String()
}

// enumIntersection is allOf over two enums of n numbers each, disjoint, so
// a pairwise intersection compares every pair (about 200 KB at 20,000).
func enumIntersection(n int) string {
	var a, b []string
	for i := 0; i < n; i++ {
		a = append(a, strconv.Itoa(i))
		b = append(b, strconv.Itoa(n+i))
	}
	return `{"allOf":[{"enum":[` + strings.Join(a, ",") + `]},{"enum":[` + strings.Join(b, ",") + `]}]}`
}

// deepPattern is a string schema whose pattern nests depth groups.
func deepPattern(depth int) string {
	return `{"type":"string","pattern":"` + strings.Repeat("(", depth) + "a" + strings.Repeat(")", depth) + `"}`
}
