package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"superfluid/app"
)

// The reproduction on the real stack: 16 stop strings of 200,000
// characters (once 9.6 s and +578 MB, the matcher converting the held-back
// text for every stop on every token) are refused as the request is read,
// on every API, naming the field in its own shape; a request within the
// bounds is served.
func TestLongStopStringsRefusedOnEveryAPI(t *testing.T) {
	st := startStack(t, app.Options{})
	base := st.URL()
	stops := make([]string, 16)
	for i := range stops {
		stops[i] = strings.Repeat(string(rune('a'+i)), 200_000)
	}
	raw, _ := json.Marshal(stops)
	for _, c := range []struct {
		api, path, body string
		check           func(apiErrorBody) string
	}{
		{"llamacpp", "/completion", `{"prompt":"hi","n_predict":4,"stop":` + string(raw) + `}`, nil},
		{"openai", "/v1/completions", `{"model":"tiny","prompt":"hi","max_tokens":4,"stop":` + string(raw) + `}`, openaiParam("stop")},
		{"openai", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stop":` + string(raw) + `}`, openaiParam("stop")},
		{"ollama", "/api/generate", `{"model":"tiny","prompt":"hi","stream":false,"options":{"num_predict":4,"stop":` + string(raw) + `}}`, nil},
		{"anthropic", "/v1/messages", `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"stop_sequences":` + string(raw) + `}`, nil},
	} {
		status, body := sendBody(t, "POST", base+c.path, []byte(c.body), nil)
		expectError(t, c.api, status, 400, body, c.check)
		if !strings.Contains(string(body), "stop") || !strings.Contains(string(body), "4096 bytes") {
			t.Errorf("%s: the refusal does not name the field and its bound: %.300s", c.path, body)
		}
	}
	// Within the bounds, the server still answers.
	status, body := sendBody(t, "POST", base+"/completion", []byte(`{"prompt":"hi","n_predict":8,"stop":["`+strings.Repeat("q", 4096)+`"]}`), nil)
	if status != 200 {
		t.Fatalf("a request within the bounds: %d %.300s", status, body)
	}
}
