package http

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/keys"
)

// Who a request's headers say it is, with --api-key and a keys file
// together: --api-key's key passes without a policy, a file's key with
// its own, anything else is refused.
func TestIdentify(t *testing.T) {
	k, err := keys.Open(keys.Source(`{"keys": [{"name": "editor", "key": "sk-editor", "requests_per_minute": 2}]}`), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Config{APIKey: "sk-admin", Keys: k})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		header, value string
		ok            bool
		name          string
	}{
		{"Authorization", "Bearer sk-admin", true, ""},
		{"x-api-key", "sk-editor", true, "editor"},
		{"Authorization", "bearer   sk-editor  ", true, "editor"},
		{"Authorization", "Bearer sk-admin2", false, ""},
		{"Authorization", "Basic sk-editor", false, ""},
		{"x-api-key", "", false, ""},
	} {
		var h fasthttp.RequestHeader
		h.Set(tc.header, tc.value)
		client, ok := s.identify(&h)
		if ok != tc.ok || (client == nil) != (tc.name == "") || client != nil && client.Name() != tc.name {
			t.Errorf("%s: %q: %v %v", tc.header, tc.value, client, ok)
		}
	}
}

// A limited key's answers carry OpenAI's and Anthropic's rate-limit
// headers in each one's words, and no others.
func TestRateHeaders(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	k, err := keys.Open(keys.Source(`{"keys": [{"name": "a", "key": "k", "requests_per_minute": 4, "tokens_per_minute": 600}]}`), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	client := k.Identify("k")
	if err := client.Begin(); err != nil {
		t.Fatal(err)
	}
	want := map[wire.API]map[string]string{
		wire.OpenAI: {"x-ratelimit-limit-requests": "4", "x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "15s",
			"x-ratelimit-limit-tokens": "600", "x-ratelimit-remaining-tokens": "600", "x-ratelimit-reset-tokens": "0s"},
		wire.Anthropic: {"anthropic-ratelimit-requests-limit": "4", "anthropic-ratelimit-requests-remaining": "3",
			"anthropic-ratelimit-requests-reset": "2026-12-02T06:00:15Z", "anthropic-ratelimit-tokens-reset": "2026-12-02T06:00:00Z"},
		wire.Ollama: {},
		wire.Llama:  {},
	}
	for api, headers := range want {
		var ctx fasthttp.RequestCtx
		setRateHeaders(&ctx, api, client)
		n := 0
		ctx.Response.Header.VisitAll(func(key, value []byte) {
			if k := strings.ToLower(string(key)); strings.HasPrefix(k, "x-ratelimit-") || strings.HasPrefix(k, "anthropic-ratelimit-") {
				n++
			}
		})
		for h, v := range headers {
			if got := string(ctx.Response.Header.Peek(h)); got != v {
				t.Errorf("%v %s: %q, want %q", api, h, got, v)
			}
		}
		if (api == wire.OpenAI || api == wire.Anthropic) != (n == 6) {
			t.Errorf("%v: %d rate-limit headers", api, n)
		}
	}
}
