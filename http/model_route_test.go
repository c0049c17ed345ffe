package http

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

func TestModelWantOf(t *testing.T) {
	for _, c := range []struct {
		method, path, body string
		kind               wire.API
		want               ModelWant
	}{
		{"POST", "/v1/chat/completions", `{"model":"a","messages":[]}`, wire.OpenAI, ModelWant{Name: "a"}},
		{"POST", "/v1/chat/completions", `{"model":5}`, wire.OpenAI, ModelWant{}},
		{"POST", "/v1/chat/completions", `not json`, wire.OpenAI, ModelWant{}},
		{"POST", "/v1/completions", `{"model":"a","suffix":"x"}`, wire.OpenAI, ModelWant{Name: "a", FIM: true}},
		{"POST", "/v1/completions", `{"model":"a","suffix":""}`, wire.OpenAI, ModelWant{Name: "a"}},
		{"POST", "/infill", `{"input_prefix":"x"}`, wire.Llama, ModelWant{FIM: true}},
		{"POST", "/infill", `[`, wire.Llama, ModelWant{FIM: true}},
		{"POST", "/api/generate", `{"model":"b","suffix":"}","keep_alive":"2m"}`, wire.Ollama, ModelWant{Name: "b", FIM: true, KeepAlive: 2 * time.Minute, HasKeepAlive: true}},
		{"POST", "/api/generate", `{"model":"b","keep_alive":0}`, wire.Ollama, ModelWant{Name: "b", HasKeepAlive: true}},
		{"POST", "/api/chat", `{"model":"b","keep_alive":-5}`, wire.Ollama, ModelWant{Name: "b", KeepAlive: -1, HasKeepAlive: true}},
		{"POST", "/api/chat", `{"model":"b","keep_alive":"soon"}`, wire.Ollama, ModelWant{Name: "b"}},
		{"POST", "/api/chat", `{"model":"b","keep_alive":1e300}`, wire.Ollama, ModelWant{Name: "b", KeepAlive: -1, HasKeepAlive: true}},
		{"POST", "/api/show", `{"name":"c"}`, wire.Ollama, ModelWant{Name: "c"}},
		{"POST", "/v1/messages", `{"model":"d","keep_alive":"2m"}`, wire.Anthropic, ModelWant{Name: "d"}},
		{"GET", "/props?model=e", ``, wire.Llama, ModelWant{Name: "e"}},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(c.method)
		ctx.Request.SetRequestURI(c.path)
		ctx.Request.SetBodyString(c.body)
		if got := modelWantOf(&ctx, c.kind); got != c.want {
			t.Errorf("%s %s %s: %+v, want %+v", c.method, c.path, c.body, got, c.want)
		}
	}
}

func TestParseKeepAlive(t *testing.T) {
	for raw, want := range map[string]time.Duration{`30`: 30 * time.Second, `1.5`: 1500 * time.Millisecond, `"5m"`: 5 * time.Minute, `"-1m"`: -1, `-1`: -1, `"0"`: 0, `0`: 0} {
		d, ok, err := wire.KeepAlive([]byte(raw))
		if err != nil || !ok || d != want {
			t.Errorf("%s: %v %v %v, want %v", raw, d, ok, err, want)
		}
	}
	for _, raw := range []string{`"soon"`, `true`, `{}`} {
		if _, _, err := wire.KeepAlive([]byte(raw)); err == nil {
			t.Errorf("%s accepted", raw)
		}
	}
	if _, ok, err := wire.KeepAlive([]byte(`null`)); ok || err != nil {
		t.Errorf("null: %v %v", ok, err)
	}
}

// peekFields reads a request's model as encoding/json does — what the
// handler will see — for every valid body, and never fails on any other.
func FuzzPeekFields(f *testing.F) {
	for _, s := range []string{
		`{"model":"a"}`, `{"MODEL":"b"}`, `{"mod\u0065l":"c"}`, `{"model":"a","model":"d"}`, `{"model":5}`,
		`{"messages":[{"content":"\"model\":\"x\"}"}],"model":"e"}`, `{"a":{"model":"inner"},"model":"f"}`,
		`{"a":[1,2,{"b":"]"}],"model" : "g" , "c":null}`, `{"model":"h\"i"}`, `{"model":"j"`, `{"model"`, `[`, ``,
		`{"model":null}`, `{"a":true,"model":"k"}`, `{"a":-1.5e3,"model":"l"}`, ` {"model":"m"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := stringOf(peekFields(body, "model")["model"])
		var want struct {
			Model json.RawMessage `json:"model"`
		}
		if json.Unmarshal(body, &want) != nil {
			return // the handler refuses it; any model will do
		}
		if w := stringOf(want.Model); got != w {
			t.Fatalf("%q: peeked model %q, encoding/json %q", body, got, w)
		}
	})
}
