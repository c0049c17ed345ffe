package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task/tasktest"
)

// FuzzOpenAIChatRequest throws arbitrary bodies (and class headers) at the
// chat-completions handler over a stub model whose scheduler refuses
// everything. Whatever the input: no panic; a refusal is an apiError with
// a 4xx/5xx status that renders as OpenAI's error object; and every
// request the handler did submit is one the scheduler accepts — decoding
// and validation, not the scheduler, are what turn bad input away.
//
//	go test -run '^$' -fuzz FuzzOpenAIChatRequest -fuzztime 30s ./http/openai/
func FuzzOpenAIChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"stub","messages":[{"role":"user","content":"hello"}],"max_tokens":8,"temperature":0}`,
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"n":2,"seed":7,"stop":["\n","###"]}`,
		`{"messages":[{"role":"developer","content":"x"},{"role":"user","content":"y"},{"role":"assistant","content":null}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":5,"logit_bias":{"65":-100,"66":2.5}}`,
		`{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":-1,"top_p":0.5,"top_k":40,"min_p":0.05,"repeat_penalty":1.1,"frequency_penalty":-2,"presence_penalty":2}`,
		`{"messages":[{"role":"user","content":"a"}],"top_k":3000000000}`,
		`{"messages":[{"role":"user","content":"a"}],"max_tokens":4294967296}`,
		`{"messages":[{"role":"tool","content":"a"}],"seed":-1,"n":16}`,
		`{"messages":[]}`, `{"messages":{}}`, `{"max_tokens":"ten"}`, `[]`, `null`, ``, `{"stop":"`,
		// Poison values: each is normalized or refused before the scheduler.
		`{"messages":[{"role":"user","content":"a"}],"temperature":1e-40}`,
		`{"messages":[{"role":"user","content":"a"}],"temperature":5e-324,"top_p":1e-50,"min_p":1e-300}`,
		`{"messages":[{"role":"user","content":"a"}],"temperature":1e400,"top_k":1e30,"seed":1e30,"n":1e30}`,
		`{"messages":[{"role":"user","content":"a"}],"repeat_penalty":1e-40,"frequency_penalty":1e300}`,
		`{"messages":[{"role":"user","content":"a"}],"max_tokens":-2,"max_completion_tokens":1e30,"top_logprobs":1e30,"logprobs":true}`,
		`{"messages":[{"role":"user","content":"a"}],"seed":18446744073709551616,"logit_bias":{"65":1e400}}`,
		`{"messages":[{"role":"user","content":"a"}],"logit_bias":` + tasktest.BanAllObject(tasktest.StubVocab, "-100") + `}`,
		`{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function"}],"tool_choice":"required","response_format":{"type":"json_object"}}`,
		`{"messages":[{"role":"user","content":"a"}],"grammar":"root ::= x","json_schema":{},"mirostat":2,"typical_p":0.5}`,
		`{"messages":[{"role":"user","content":"a"}],"tools":[],"tool_choice":"auto","response_format":{"type":"text"},"modalities":["text"],"mirostat":0}`,
		`{"messages":[{"role":"user","content":"` + strings.Repeat("x", 16*256+1) + `"}]}`,
		// Images: a remote URL (no fetcher here), another scheme, a data URL.
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"text","text":"a"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"gopher://h/a"}}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}}]}]}`,
	} {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":"a"}]}`), "background")
	f.Add([]byte(`{"messages":[{"role":"user","content":"a"}]}`), "vip")
	a := testAPI(0)
	m, sc := tasktest.StubModel(f)
	f.Fuzz(func(t *testing.T, body []byte, class string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/v1/chat/completions")
		if class != "" {
			ctx.Request.Header.Set("X-Superfluid-Class", class)
		}
		ctx.Request.SetBody(body)
		err := a.chat(&ctx, m)
		for _, req := range sc.Taken() {
			if msg := tasktest.Unschedulable(m.Desc, &req); msg != "" {
				t.Fatalf("submitted a request the scheduler would refuse (%s): %+v\nbody: %q", msg, req, body)
			}
		}
		if err == nil {
			t.Fatalf("the stub scheduler refuses everything, yet the handler succeeded: %q", body)
		}
		e := wire.AsError(err)
		if e.Status < 400 || e.Status > 599 || e.Msg == "" || e.Type == "" {
			t.Fatalf("refusal %+v for %q", e, body)
		}
		if e.Status >= 500 && !errors.Is(err, tasktest.ErrStubRefused) {
			t.Fatalf("a server error for client input: %+v for %q", e, body)
		}
		wire.WriteError(&ctx, wire.OpenAI, err)
		var out struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(ctx.Response.Body(), &out); err != nil || out.Error.Message == "" || ctx.Response.StatusCode() != e.Status {
			t.Fatalf("error body %q (status %d): %v", ctx.Response.Body(), ctx.Response.StatusCode(), err)
		}
	})
}
