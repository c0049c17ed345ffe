package wire

import (
	"encoding/json"
	"testing"
)

// OpenAI sends arguments as a string holding an object; "" is what some
// clients send for a call that takes none.
func TestCallArguments(t *testing.T) {
	for raw, want := range map[string]string{
		`"{\"a\": 1}"`: `{"a": 1}`,
		`{"a": 1}`:     `{"a": 1}`,
		`""`:           `{}`,
		`"  "`:         `{}`,
	} {
		got, err := CallArguments(json.RawMessage(raw))
		if err != nil || string(got) != want {
			t.Errorf("%s: %s, %v; want %s", raw, got, err, want)
		}
	}
	for _, raw := range []string{`"[1]"`, `5`, `null`, `"{"`, ``} {
		if got, err := CallArguments(json.RawMessage(raw)); err == nil {
			t.Errorf("%s: accepted as %s", raw, got)
		}
	}
}
