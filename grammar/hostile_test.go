package grammar

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The hostile inputs of issue 21, each answered (refused or converted) at
// a cost bounded by its size. No test times anything: the bound asserted
// is on memory allocated, loosely (a constant factor of the input, or the
// work budget), and the time follows by construction — every loop these
// inputs reach is linear in them or stops at a limit checked first.
// hostile_measure_test.go reports the time and memory of each.

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// within fails when f allocates more than limit bytes.
func within(t *testing.T, what string, limit uint64, f func()) {
	t.Helper()
	if n := allocated(f); n > limit {
		t.Errorf("%s allocated %d MB, more than %d MB", what, n>>20, limit>>20)
	}
}

// workBound is a loose bound on what converting a schema of n bytes may
// allocate: twice its work budget, whose units are about a byte each.
func workBound(n int) uint64 { return 2 * uint64(newBudget(n).max) }

func wantLimit(t *testing.T, what string, err error, limit string) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(le.Limit, limit) {
		t.Errorf("%s: %v, want a *LimitError naming %q", what, err, limit)
	}
}

// 60,000 nested groups: refused by the pre-scan before anything is
// parsed. On main it took 35 s and 3.9 GB: nested groups were named after
// their parent, so names grew with depth.
func TestHostileDeepGBNF(t *testing.T) {
	text := deepGBNF(60000)
	var err error
	within(t, "the refusal of 60,000 nested groups", 1<<20, func() { _, err = ParseGBNF(text) })
	wantLimit(t, "60,000 nested groups", err, "nesting")
	if !strings.Contains(err.Error(), "128") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("the error should name the limit and the place: %v", err)
	}

	g := mustGrammar(t, deepGBNF(MaxGBNFNesting))
	checkAccepts(t, g, []string{"a"}, []string{"", "aa"})
	_, err = ParseGBNF(deepGBNF(MaxGBNFNesting + 1))
	wantLimit(t, "one level past the bound", err, "nesting")

	// Within the bound, a long rule name with many groups and repetitions
	// costs its length once, not once per group (on main, 10 GB of names).
	name := strings.Repeat("n", 100000)
	body := strings.Repeat(`("a" ("b" "c"{0,50})) `, 1000)
	long := "root ::= " + name + "\n" + name + " ::= " + body + "\n"
	var g2 *Grammar
	n := allocated(func() { g2, err = ParseGBNF(long) })
	if err != nil {
		t.Fatal(err)
	}
	if limit := 64*len(long) + 1024*g2.Size(); n > uint64(limit) {
		t.Errorf("a 100 KB rule name over 52,000 groups and repetitions allocated %d MB, more than %d MB", n>>20, limit>>20)
	}
	_, err = ParseGBNF(strings.Repeat("x", MaxGBNFBytes+1))
	wantLimit(t, "a grammar over a megabyte", err, "size")
}

// A chain of 80,000 rules, the last nullable, in the order that made the
// fixed-point nullable computation take 80,000 passes (8.5 s on main):
// the worklist visits each symbol once. The chain is then refused, as
// llama.cpp's matcher would recurse once per rule of it and overflow the
// native stack (it killed the server); a shorter one is parsed.
func TestHostileRuleChain(t *testing.T) {
	text := chainGBNF(80000)
	if len(text) > MaxGBNFBytes {
		t.Fatalf("the chain is %d bytes, past the size bound it should be within", len(text))
	}
	var err error
	within(t, "an 80,000-rule chain", 128*uint64(len(text)), func() { _, err = ParseGBNF(text) })
	wantLimit(t, "an 80,000-rule chain", err, "depth of rules")

	g := mustGrammar(t, chainGBNF(MaxRuleChain-2))
	for nt := range g.names {
		if want := g.names[nt] != "root"; g.nullable[nt] != want {
			t.Fatalf("rule %s: nullable %v, want %v", g.ruleName(nt), g.nullable[nt], want)
		}
	}
	checkAccepts(t, g, []string{"x"}, []string{"", "xx"})
	_, err = ParseGBNF(chainGBNF(MaxRuleChain))
	wantLimit(t, "a chain at the bound", err, "depth of rules")

	// Rules that derive nothing twice over: a path through 40 of them is
	// 2^40 expansions long.
	var doubling strings.Builder
	doubling.WriteString("root ::= a40 \"x\"\na0 ::= \"\"\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&doubling, "a%d ::= a%d a%d\n", i, i-1, i-1)
	}
	_, err = ParseGBNF(doubling.String())
	wantLimit(t, "40 doubling empty rules", err, "depth of rules")
	// After a character, too: the advance starts mid-alternative.
	_, err = ParseGBNF(strings.Replace(doubling.String(), "root ::= a40", `root ::= "y" a40`, 1))
	wantLimit(t, "40 doubling empty rules after a character", err, "depth of rules")

	// The chain closed into a loop at its left edge is left recursion,
	// found by a search that keeps its own stack.
	loop := strings.Replace(text, "\"\"\n", chainFirstRule(text)+"\n", 1)
	if _, err := ParseGBNF(loop); err == nil || !strings.Contains(err.Error(), "left recursion") {
		t.Errorf("an 80,000-rule left-recursive loop: %v", err)
	}
}

// chainFirstRule is the name the chain's root refers to.
func chainFirstRule(chain string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(chain, "root::="), `"`)
	return first
}

// allOf over two 20,000-value enums: on main every pair went through big
// rationals (no answer in 25 s); values are now keyed and intersected
// through a map.
func TestHostileEnumIntersection(t *testing.T) {
	schema := enumIntersection(20000)
	var err error
	within(t, "intersecting two disjoint 20,000-value enums", workBound(len(schema)), func() { _, err = FromJSONSchema([]byte(schema), Options{}) })
	if !errors.Is(err, ErrUnsatisfiable) {
		t.Fatalf("disjoint enums: %v, want ErrUnsatisfiable", err)
	}

	// Equality is by value: 10.0, 1e1 and 10 are one number; the keys
	// must not tell them apart, nor confuse 1 with "1" or [1] with {"1":1}.
	var a, b []string
	for i := 0; i < 20000; i++ {
		a = append(a, fmt.Sprint(i))
		if i%2 == 0 {
			b = append(b, fmt.Sprintf("%d.0", i), fmt.Sprintf(`"%d"`, i+1))
		}
	}
	overlap := `{"allOf":[{"enum":[` + strings.Join(a, ",") + `,[1],{"a":[1,2],"b":null}]},{"enum":[` + strings.Join(b, ",") + `,1e1,{"b":null,"a":[1,2.00]},{"1":1}]}]}`
	text, err := FromJSONSchema([]byte(overlap), Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := mustGrammar(t, text)
	checkAccepts(t, g, []string{"0", "10", "19998", `{"a":[1,2],"b":null}`}, []string{"1", "19999", `"1"`, "[1]", `{"1":1}`, "10.0"})
	if n := strings.Count(text, "|") + 1; n != 10001 {
		t.Errorf("%d values in common, want 10,001", n)
	}
}

// A pattern nested 200,000 groups deep took 6.5 s and 731 MB on the
// server, and deeper ones could overflow the stack: a pattern's size
// and nesting are bounded before it is parsed.
func TestHostilePattern(t *testing.T) {
	var err error
	schema := deepPattern(200000)
	within(t, "refusing a pattern nested 200,000 deep", 16*uint64(len(schema))+(1<<20), func() { _, err = FromJSONSchema([]byte(schema), Options{}) })
	wantLimit(t, "a 400 KB pattern", err, "pattern size")
	_, err = FromJSONSchema([]byte(deepPattern(MaxPatternNesting+1)), Options{})
	wantLimit(t, "a pattern one group past the bound", err, "pattern nesting")
	if le := (*LimitError)(nil); errors.As(err, &le) && le.At != "#" {
		t.Errorf("the error should place the pattern in the schema: %v", err)
	}
	g := schemaGrammar(t, deepPattern(MaxPatternNesting), Options{})
	checkAccepts(t, g, []string{`"a"`, `"xax"`}, []string{`"x"`})
	// A flat pattern near the size bound is converted.
	words := make([]string, 0, 6000)
	for i := 0; len(strings.Join(words, "|")) < MaxPatternBytes-20; i++ {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	big := `{"type":"string","pattern":"^(` + strings.Join(words, "|") + `)$"}`
	g = schemaGrammar(t, big, Options{})
	checkAccepts(t, g, []string{`"w0"`, `"w1234"`}, []string{`"w"`, `"x1"`})
}

// allOf over two references whose targets hold two references each, 40
// levels down: merging expands both sides property by property, 2^40
// times (on main, no answer in a minute). The work budget refuses it
// after work in proportion to the schema.
func TestHostileRefExpansion(t *testing.T) {
	schema := refDoubling(40)
	var err error
	within(t, "refusing 2^40 expansions", workBound(len(schema)), func() { _, err = FromJSONSchema([]byte(schema), Options{}) })
	wantLimit(t, "2^40 expansions", err, "work")
	// A few levels are converted, and mean what they say.
	g := schemaGrammar(t, refDoubling(3), Options{CompactWhitespace: true})
	checkAccepts(t, g, []string{`{"a":{"a":{"v":1}},"b":{"b":{"v":2}}}`}, []string{`{"a":{"a":{"v":"x"}}}`})
}

// References expanded within one another are bounded in depth; a chain
// of references kept as rules is written without recursion.
func TestHostileRefChains(t *testing.T) {
	n := 8000
	schema := refChain(n)
	var text string
	var err error
	within(t, fmt.Sprintf("a chain of %d references", n), workBound(len(schema)), func() { text, err = FromJSONSchema([]byte(schema), Options{CompactWhitespace: true}) })
	if err != nil {
		t.Fatal(err)
	}
	if rules := strings.Count(text, "::="); rules < n {
		t.Errorf("%d rules for %d references", rules, n)
	}

	// allOf over a reference whose target is allOf over the next, and so
	// on: each expansion sits inside the one before.
	var defs []string
	for i := 0; i < 100; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"minimum":%d}]}`, i, i+1, i))
	}
	defs = append(defs, `"d100":{"type":"integer"}`)
	nested := `{"$defs":{` + strings.Join(defs, ",") + `},"allOf":[{"$ref":"#/$defs/d0"},{"maximum":1000}]}`
	_, err = FromJSONSchema([]byte(nested), Options{})
	wantLimit(t, "100 expansions nested", err, "$refs expanded")
}

// A schema's JSON nesting is bounded before it is decoded; 127 levels of
// nested objects (255 of JSON) are converted.
func TestHostileSchemaNesting(t *testing.T) {
	var err error
	deep := []byte(`{"enum":[` + strings.Repeat("[", 400000) + strings.Repeat("]", 400000) + `]}`)
	within(t, "refusing a schema nested 400,000 deep", 1<<20, func() { _, err = FromJSONSchema(deep, Options{}) })
	wantLimit(t, "400,000 levels", err, "nesting")
	g := schemaGrammar(t, nestedSchema(MaxSchemaNesting/2-1), Options{CompactWhitespace: true})
	v := strings.Repeat(`{"p":`, MaxSchemaNesting/2-1) + "7" + strings.Repeat("}", MaxSchemaNesting/2-1)
	checkAccepts(t, g, []string{v}, []string{strings.Replace(v, "7", `"7"`, 1)})
	_, err = FromJSONSchema([]byte(nestedSchema(MaxSchemaNesting/2)), Options{})
	wantLimit(t, "one level past", err, "nesting")
	huge := make([]byte, MaxSchemaBytes+1)
	within(t, "refusing a schema past MaxSchemaBytes", 1<<20, func() { _, err = FromJSONSchema(huge, Options{}) })
	wantLimit(t, "a schema past MaxSchemaBytes", err, "size")
}

// A 200,000-character property name beside additionalProperties: the
// trie of names excluded from the extra keys is as deep as the name (a
// recursion on main, 6 s and 620 MB); its nodes are paid for from the
// work budget, and it is walked with its own stack.
func TestHostileLongPropertyName(t *testing.T) {
	var err error
	schema := longPropertyName(200000)
	within(t, "a 200,000-character property name", workBound(len(schema)), func() { _, err = FromJSONSchema([]byte(schema), Options{}) })
	wantLimit(t, "a 200,000-character name", err, "work")
	g := schemaGrammar(t, longPropertyName(2000), Options{CompactWhitespace: true})
	name := strings.Repeat("k", 2000)
	checkAccepts(t, g, []string{`{"` + name + `":1}`, `{"` + name + `x":2}`, `{"k":3}`}, []string{`{"` + name + `":"s"}`})
}

// oneOf over 200 enums of 100 values: their disjointness was checked pair
// by pair of branches and of values (4×10^8 comparisons through big
// rationals); it is one pass over the values per JSON type.
func TestHostileOneOfEnums(t *testing.T) {
	var alts []string
	for i := 0; i < 200; i++ {
		var vals []string
		for j := 0; j < 100; j++ {
			vals = append(vals, fmt.Sprint(i*100+j))
		}
		alts = append(alts, `{"enum":[`+strings.Join(vals, ",")+`]}`)
	}
	schema := `{"oneOf":[` + strings.Join(alts, ",") + `]}`
	var err error
	within(t, "200 disjoint enum branches", workBound(len(schema)), func() { _, err = FromJSONSchema([]byte(schema), Options{}) })
	if err != nil {
		t.Fatal(err)
	}
	overlapping := strings.Replace(schema, `{"enum":[19900,`, `{"enum":[5e0,`, 1)
	_, err = FromJSONSchema([]byte(overlapping), Options{})
	var u *UnsupportedError
	if !errors.As(err, &u) || u.Keyword != "oneOf" || !strings.Contains(u.Reason, "branches 0 and 199") {
		t.Errorf("5 in branches 0 and 199: %v", err)
	}
	for _, c := range []struct {
		schema string
		ok     bool
	}{
		{`{"oneOf":[{"type":"string"},{"enum":[1,2]}]}`, false}, // an enum admits every type until read
		{`{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}`, true},
		{`{"oneOf":[{"enum":[1]},{"enum":["1"]},{"const":[1]}]}`, true},
		{`{"oneOf":[{"enum":[1]},{"const":1.0}]}`, false},
		{`{"$defs":{"a":{"type":"string"}},"oneOf":[{"$ref":"#/$defs/a"},{"type":"integer"}]}`, false},
		{`{"oneOf":[{"type":"integer"},false,{"type":"string"}]}`, true},
	} {
		_, err := FromJSONSchema([]byte(c.schema), Options{})
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.schema, err, c.ok)
		}
	}
}

// Numbers are read in one pass: a 100,000-digit enum value costs its
// length; one past the exact range beside minimum or maximum is refused
// by name (on main it dereferenced a nil value and panicked).
func TestHostileNumbers(t *testing.T) {
	long := "1." + strings.Repeat("3", 100000)
	schema := `{"enum":[` + long + `,2]}`
	var err error
	var text string
	within(t, "a 100,000-digit enum value", workBound(len(schema)), func() { text, err = FromJSONSchema([]byte(schema), Options{}) })
	if err != nil || !strings.Contains(text, long) {
		t.Fatalf("%.100s: %v", text, err)
	}
	for _, s := range []string{`{"enum":[1e5000],"minimum":0}`, `{"enum":[` + long + `],"maximum":2}`} {
		_, err := FromJSONSchema([]byte(s), Options{})
		var u *UnsupportedError
		if !errors.As(err, &u) || u.Keyword != "enum" {
			t.Errorf("%.60s: %v, want an UnsupportedError naming enum", s, err)
		}
	}
	_, err = FromJSONSchema([]byte(`{"type":"number","minimum":`+long+`}`), Options{})
	var u *UnsupportedError
	if !errors.As(err, &u) || u.Keyword != "minimum" {
		t.Errorf("a 100,000-digit minimum: %v, want an UnsupportedError naming minimum", err)
	}
	for in, want := range map[string]string{"1e2": "100", "-0.0": "0", "12.340e-1": "1.234", "0.00100": "0.001", "-5e-3": "-0.005", "7E+1": "70"} {
		if got := canonicalNumber(jsonNumber(in)); got != want {
			t.Errorf("canonicalNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

// Many prefixItems nest a group each; every 16 levels become a rule, so
// the grammar stays within the GBNF nesting bound.
func TestManyPrefixItems(t *testing.T) {
	items := strings.TrimSuffix(strings.Repeat(`{"type":"integer"},`, 300), ",")
	g := schemaGrammar(t, `{"type":"array","prefixItems":[`+items+`],"items":false}`, Options{CompactWhitespace: true})
	var v []string
	for i := 0; i < 300; i++ {
		v = append(v, fmt.Sprint(i))
	}
	checkAccepts(t, g, []string{"[]", "[" + strings.Join(v, ",") + "]", "[" + strings.Join(v[:150], ",") + "]"}, []string{"[" + strings.Join(v, ",") + ",1]", `["x"]`})
}

// The budget must never be what refuses a real schema: the JSON Schema
// Test Suite's, and large tool and response schemas, spend a quarter of
// it at most.
func TestWorkBudgetHeadroom(t *testing.T) {
	schemas := map[string]string{"thirty properties": thirtyProperties(), "2,000 properties and typed extras": manyProperties(2000), "200 models inheriting a base": inheritance(200), "20,000 enum strings": stringEnum(20000)}
	for name, s := range schemas {
		_, spent, err := convertSchema([]byte(s), Options{})
		budget := newBudget(len(s)).max
		if err != nil || spent > budget/4 {
			t.Errorf("%s (%d bytes): spent %d of %d: %v", name, len(s), spent, budget, err)
		}
	}
	forEachSuiteSchema(t, func(s string) {
		if _, spent, _ := convertSchema([]byte(s), Options{}); spent > newBudget(len(s)).max/4 {
			t.Errorf("%s: spent %d", s, spent)
		}
	})
}
