package grammar

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// suiteDir is the JSON Schema Test Suite, draft 2020-12, in ../shared.
const suiteDir = "../../shared/jsonschema-test-suite/draft2020-12"

// knownRefusals are valid instances the grammar refuses on purpose: the
// converter admits a subset of what the schema admits there, and says so in
// its documentation. The test checks they are still refused, so this list
// cannot go stale.
var knownRefusals = map[string]string{
	"format.json | email format | invalid email string is only an annotation by default":         formatAsserted,
	"format.json | ipv4 format | invalid ipv4 string is only an annotation by default":           formatAsserted,
	"format.json | date format | invalid date string is only an annotation by default":           formatAsserted,
	"format.json | date-time format | invalid date-time string is only an annotation by default": formatAsserted,
	"format.json | time format | invalid time string is only an annotation by default":           formatAsserted,
	"format.json | uuid format | invalid uuid string is only an annotation by default":           formatAsserted,

	"optional/format/date-time.json | validation of date-time strings | a valid date-time with a leap second, with minus offset": leapSecond,
	"optional/format/time.json | validation of time strings | valid leap second, positive time-offset":                           leapSecond,
	"optional/format/time.json | validation of time strings | valid leap second, large positive time-offset":                     leapSecond,
	"optional/format/time.json | validation of time strings | valid leap second, negative time-offset":                           leapSecond,
	"optional/format/time.json | validation of time strings | valid leap second, large negative time-offset":                     leapSecond,

	"optional/format/email.json | validation of e-mail addresses | an IPv6-address-literal after the @ is valid": "email: IPv6 address literals are not admitted",
}

const (
	formatAsserted = "format is asserted (the format-assertion vocabulary), while 2020-12 by default only annotates"
	leapSecond     = "a leap second is admitted only as 23:59:60 in UTC"
)

type suiteTally struct {
	cases, converted, refused, instances, agreed int
}

// TestJSONSchemaSuite runs the official suite through the converter and the
// GBNF recognizer: for each case the converter supports, every instance
// marked valid is accepted and every one marked invalid refused; every
// other case must be refused with an *UnsupportedError naming a keyword.
//
// Instances are written as canonical compact JSON (see canonicalJSON: plain
// decimal numbers, an integral number without a fraction, one spelling per
// string character) with object keys put in the order the schema first
// names them (properties, required, keys of const/enum objects), because a
// grammar fixes property order: an instance in another order is the same
// value, and the test asks whether that value is admitted.
func TestJSONSchemaSuite(t *testing.T) {
	if _, err := os.Stat(suiteDir); err != nil {
		t.Skipf("JSON Schema Test Suite not found at %s (../shared is absent): %v", suiteDir, err)
	}
	files, _ := filepath.Glob(filepath.Join(suiteDir, "*.json"))
	more, _ := filepath.Glob(filepath.Join(suiteDir, "optional", "format", "*.json"))
	files = append(files, more...)
	tallies := map[string]*suiteTally{}
	refusedBy := map[string]int{}
	seenKnown := map[string]bool{}
	for _, file := range files {
		name, _ := filepath.Rel(suiteDir, file)
		tally := &suiteTally{}
		tallies[name] = tally
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := decodeOrdered(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, c := range doc.([]any) {
			co := c.(*object)
			desc := co.vals["description"].(string)
			schema := co.vals["schema"]
			tally.cases++
			text, err := FromJSONSchema([]byte(canonicalJSON(schema)), Options{})
			var unsup *UnsupportedError
			switch {
			case errors.As(err, &unsup):
				if unsup.Keyword == "" {
					t.Errorf("%s / %s: refused without naming a keyword: %v", name, desc, err)
				}
				tally.refused++
				refusedBy[unsup.Keyword]++
				if os.Getenv("GRAMMAR_SUITE_VERBOSE") != "" {
					t.Logf("%s / %s: %v", name, desc, err)
				}
				continue
			case errors.Is(err, ErrUnsatisfiable):
				text = "" // every instance must then be invalid
			case err != nil:
				t.Errorf("%s / %s: %v", name, desc, err)
				continue
			}
			tally.converted++
			var g *Grammar
			if text != "" {
				if g, err = ParseGBNF(text); err != nil {
					t.Errorf("%s / %s: the converter's grammar does not parse: %v\n%s", name, desc, err, text)
					continue
				}
			}
			rank := keyRank(schema)
			var dump strings.Builder
			for _, tc := range co.vals["tests"].([]any) {
				to := tc.(*object)
				tdesc := to.vals["description"].(string)
				valid := to.vals["valid"].(bool)
				inst := canonicalJSON(reorder(to.vals["data"], rank))
				tally.instances++
				got := g != nil && g.Accepts(inst)
				fmt.Fprintf(&dump, "%d %s\n", map[bool]int{false: 0, true: 1}[got], inst)
				id := name + " | " + desc + " | " + tdesc
				if reason, known := knownRefusals[id]; known {
					seenKnown[id] = true
					if got || !valid {
						t.Errorf("%s: listed as a known refusal (%s) but accepted=%v valid=%v", id, reason, got, valid)
					}
					continue
				}
				if got != valid {
					t.Errorf("%s: instance %s: valid=%v, grammar accepts=%v", id, inst, valid, got)
					continue
				}
				tally.agreed++
			}
			dumpCase(t, name, desc, text, dump.String())
		}
	}
	for id := range knownRefusals {
		if !seenKnown[id] {
			t.Errorf("known refusal %q is not in the suite", id)
		}
	}
	logSuite(t, tallies, refusedBy)
}

// dumpCase writes a converted case for an outside cross-check (llama.cpp's
// own grammar matcher) when GRAMMAR_SUITE_DUMP names a directory:
// <n>.gbnf holds the grammar, <n>.inst our verdict and the instance per line.
func dumpCase(t *testing.T, file, desc, grammar, instances string) {
	dir := os.Getenv("GRAMMAR_SUITE_DUMP")
	if dir == "" || grammar == "" {
		return
	}
	base := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(file+"-"+desc))
	if err := os.WriteFile(base+".gbnf", []byte(grammar), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".inst", []byte(instances), 0o644); err != nil {
		t.Fatal(err)
	}
}

func logSuite(t *testing.T, tallies map[string]*suiteTally, refusedBy map[string]int) {
	names := make([]string, 0, len(tallies))
	for n := range tallies {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	var sum suiteTally
	fmt.Fprintf(&b, "%-36s %5s %9s %7s %9s %6s\n", "file", "cases", "converted", "refused", "instances", "agreed")
	for _, n := range names {
		x := tallies[n]
		fmt.Fprintf(&b, "%-36s %5d %9d %7d %9d %6d\n", n, x.cases, x.converted, x.refused, x.instances, x.agreed)
		sum.cases += x.cases
		sum.converted += x.converted
		sum.refused += x.refused
		sum.instances += x.instances
		sum.agreed += x.agreed
	}
	fmt.Fprintf(&b, "%-36s %5d %9d %7d %9d %6d\n", "total", sum.cases, sum.converted, sum.refused, sum.instances, sum.agreed)
	kws := make([]string, 0, len(refusedBy))
	for k := range refusedBy {
		kws = append(kws, k)
	}
	sort.Strings(kws)
	b.WriteString("refused by keyword:")
	for _, k := range kws {
		fmt.Fprintf(&b, " %s=%d", k, refusedBy[k])
	}
	t.Log("\n" + b.String())
}

// keyRank orders property names as the schema first names them.
func keyRank(schema any) map[string]int {
	rank := map[string]int{}
	add := func(k string) {
		if _, ok := rank[k]; !ok {
			rank[k] = len(rank)
		}
	}
	var literal func(v any)
	literal = func(v any) {
		switch x := v.(type) {
		case *object:
			for _, k := range x.keys {
				add(k)
				literal(x.vals[k])
			}
		case []any:
			for _, e := range x {
				literal(e)
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case *object:
			for _, k := range x.keys {
				val := x.vals[k]
				switch k {
				case "properties":
					if p, ok := val.(*object); ok {
						for _, name := range p.keys {
							add(name)
						}
					}
				case "required":
					if list, ok := val.([]any); ok {
						for _, n := range list {
							if s, ok := n.(string); ok {
								add(s)
							}
						}
					}
				case "const", "enum":
					literal(val)
					continue
				}
				walk(val)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(schema)
	return rank
}

// reorder sorts every object's keys by rank, unranked keys last in their
// own order.
func reorder(v any, rank map[string]int) any {
	switch x := v.(type) {
	case *object:
		o := &object{keys: append([]string(nil), x.keys...), vals: map[string]any{}}
		for k, val := range x.vals {
			o.vals[k] = reorder(val, rank)
		}
		sort.SliceStable(o.keys, func(i, j int) bool {
			ri, oki := rank[o.keys[i]]
			rj, okj := rank[o.keys[j]]
			if !oki || !okj {
				return oki && !okj
			}
			return ri < rj
		})
		return o
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = reorder(e, rank)
		}
		return out
	}
	return v
}
