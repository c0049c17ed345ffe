package grammar

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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

// refDoubling is allOf over two references to the last of n definitions,
// each an object whose two properties refer to the one before: merging
// the two sides expands both, property by property, 2^n times.
func refDoubling(n int) string {
	var defs []string
	defs = append(defs, `"d0":{"type":"object","properties":{"v":{"type":"integer"}}}`)
	for i := 1; i < n; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i-1, i-1))
	}
	last := fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, n-1)
	return `{"$defs":{` + strings.Join(defs, ",") + `},"allOf":[` + last + `,` + last + `]}`
}

// refChain is n definitions each holding a reference to the next: one
// rule per definition, written without recursing down the chain.
func refChain(n int) string {
	var defs []string
	for i := 0; i < n; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"array","items":{"$ref":"#/$defs/d%d"}}`, i, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"integer"}`, n))
	return `{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/d0"}`
}

// longPropertyName is an object with one declared property whose name is
// n characters, other properties admitted: the key trie is n deep.
func longPropertyName(n int) string {
	return `{"type":"object","properties":{"` + strings.Repeat("k", n) + `":{"type":"integer"}},"additionalProperties":{"type":"integer"}}`
}

// oneOfConsts is oneOf over n distinct consts (disjoint, so supported):
// checking every pair of branches was quadratic.
func oneOfConsts(n int) string {
	var alts []string
	for i := 0; i < n; i++ {
		alts = append(alts, fmt.Sprintf(`{"const":%d}`, i))
	}
	return `{"oneOf":[` + strings.Join(alts, ",") + `]}`
}

// nestedSchema nests object schemas levels deep through properties.
func nestedSchema(levels int) string {
	return strings.Repeat(`{"type":"object","properties":{"p":`, levels) + `{"type":"integer"}` + strings.Repeat(`}}`, levels)
}

// manyProperties is an object of n declared properties whose other
// properties must be integers: a large trie of excluded names.
func manyProperties(n int) string {
	var props []string
	for i := 0; i < n; i++ {
		props = append(props, fmt.Sprintf(`"property_name_%d":{"type":"string"}`, i))
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `},"additionalProperties":{"type":"integer"}}`
}

// inheritance is n models, each allOf a base model and its own
// properties, linked in a ring: the shape pydantic and OpenAPI write.
func inheritance(n int) string {
	var defs []string
	for i := 0; i < n; i++ {
		defs = append(defs, fmt.Sprintf(`"M%d":{"allOf":[{"$ref":"#/$defs/Base"},{"type":"object","properties":{"x%d":{"type":"integer"},"next":{"$ref":"#/$defs/M%d"}}}]}`, i, i, (i+1)%n))
	}
	return `{"$defs":{"Base":{"type":"object","properties":{"id":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["id"]},` + strings.Join(defs, ",") + `},"$ref":"#/$defs/M0"}`
}

// stringEnum is an enum of n strings.
func stringEnum(n int) string {
	var vals []string
	for i := 0; i < n; i++ {
		vals = append(vals, fmt.Sprintf(`"value-%d"`, i))
	}
	return `{"enum":[` + strings.Join(vals, ",") + `]}`
}

func jsonNumber(s string) json.Number { return json.Number(s) }

// forEachSuiteSchema calls f with each schema of the JSON Schema Test
// Suite, written compactly.
func forEachSuiteSchema(t *testing.T, f func(schema string)) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(suiteDir, "*.json"))
	more, _ := filepath.Glob(filepath.Join(suiteDir, "optional", "format", "*.json"))
	if len(files) == 0 {
		t.Logf("JSON Schema Test Suite not found at %s", suiteDir)
	}
	for _, file := range append(files, more...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := decodeOrdered(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, c := range doc.([]any) {
			f(canonicalJSON(c.(*object).vals["schema"]))
		}
	}
}
