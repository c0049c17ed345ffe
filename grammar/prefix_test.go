package grammar

import "testing"

func TestPrefixedRenamesRulesOnly(t *testing.T) {
	text, err := FromJSONSchema([]byte(`{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]{2,3}$"},"n":{"type":"integer"}},"required":["a"]}`), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	both := "root ::= x-root \"|\" y-root\n" + Prefixed(text, "x-") + Prefixed(text, "y-")
	g, err := ParseGBNF(both)
	if err != nil {
		t.Fatalf("%v\n%s", err, both)
	}
	for _, s := range []string{`{"a": "ab"}|{"a": "abc", "n": 7}`, `{"a":"xy"}|{"a":"zz"}`} {
		if !g.Accepts(s) {
			t.Errorf("refuses %s\n%s", s, both)
		}
	}
	if g.Accepts(`{"a": "abcd"}|{"a": "ab"}`) {
		t.Errorf("accepts a value its pattern refuses")
	}
}
