package grammar

import (
	"fmt"
	"strings"
	"testing"
)

// thirtyProperties is a 30-property object schema of the kinds a tool call
// or extraction schema has: bounded strings and numbers, enums, formats,
// arrays and a nested object, half of them required.
func thirtyProperties() string {
	var props, req []string
	for i := 0; i < 30; i++ {
		var s string
		switch i % 6 {
		case 0:
			s = `{"type":"string","maxLength":40}`
		case 1:
			s = fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, i, 1000*i+17)
		case 2:
			s = `{"type":"number","minimum":-1.5,"exclusiveMaximum":99.25}`
		case 3:
			s = `{"enum":["red","green","blue",null]}`
		case 4:
			s = `{"type":"string","format":"date-time"}`
		case 5:
			s = `{"type":"array","items":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z0-9-]{1,12}$"},"n":{"type":"integer"}},"required":["id"]},"maxItems":5}`
		}
		name := fmt.Sprintf("field_%02d", i)
		props = append(props, fmt.Sprintf("%q:%s", name, s))
		if i%2 == 0 {
			req = append(req, fmt.Sprintf("%q", name))
		}
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `],"additionalProperties":false}`
}

func TestThirtyProperties(t *testing.T) {
	text, err := FromJSONSchema([]byte(thirtyProperties()), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	g := mustGrammar(t, text)
	var fields []string
	for i := 0; i < 30; i += 2 { // the required ones only
		var v string
		switch i % 6 {
		case 0:
			v = `"hello"`
		case 2:
			v = `99.2`
		case 4:
			v = `"2024-05-01T10:00:00Z"`
		}
		fields = append(fields, fmt.Sprintf(`"field_%02d":%s`, i, v))
	}
	ok := "{" + strings.Join(fields, ",") + "}"
	checkAccepts(t, g, []string{ok}, []string{strings.Replace(ok, "99.2", "99.25", 1), strings.Replace(ok, `"hello"`, `"`+strings.Repeat("x", 41)+`"`, 1)})
	t.Logf("30-property grammar: %d bytes, %d rules", len(text), strings.Count(text, "::="))
}

func BenchmarkFromJSONSchema30Properties(b *testing.B) {
	schema := []byte(thirtyProperties())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromJSONSchema(schema, Options{Strict: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseGBNF30Properties(b *testing.B) {
	text, err := FromJSONSchema([]byte(thirtyProperties()), Options{Strict: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseGBNF(text); err != nil {
			b.Fatal(err)
		}
	}
}
