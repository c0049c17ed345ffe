package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"superfluid/app"
)

// browserRequest sends one request as a browser would: with an Origin (""
// for none) and a Host ("" for the URL's own).
func browserRequest(t *testing.T, method, url, origin, host string, body []byte, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if host != "" {
		req.Host = host
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// readAll reads and closes an answer's body.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A page on another site cannot drive the loopback server: its browser's
// Origin header is refused on every route — a chat, a text/plain pull
// (which needs no preflight), a public probe — with 403 in the route's
// own error shape and no CORS header that would let the page read it.
// A page on this machine (http://localhost:3000) and a client that sends
// no Origin (CLIs, SDKs, editors) are served, the page with the CORS
// headers its browser needs.
func TestBrowserOriginRules(t *testing.T) {
	st := startStack(t, app.Options{})
	chat := marshalBody(t, chatBody("hi"))
	const evil = "http://evil.example"
	for _, c := range []struct {
		method, path, api string
		body              []byte
		header            map[string]string
	}{
		{"POST", "/v1/chat/completions", "openai", chat, nil},
		{"POST", "/api/pull", "ollama", []byte(`{"model":"hf.co/x/y"}`), map[string]string{"Content-Type": "text/plain"}},
		{"POST", "/v1/messages", "anthropic", marshalBody(t, anthropicBody("hi")), nil},
		{"POST", "/completion", "llamacpp", marshalBody(t, llamaCompletionBody("hi")), nil},
		{"GET", "/health", "llamacpp", nil, nil},
		{"GET", "/v1/models", "openai", nil, nil},
	} {
		resp := browserRequest(t, c.method, st.URL()+c.path, evil, "", c.body, c.header)
		b := readAll(t, resp)
		expectError(t, c.api, resp.StatusCode, 403, b, func(e apiErrorBody) string {
			if !strings.Contains(e.Message, "evil.example") {
				return c.path + ": the message does not name the origin: " + e.Message
			}
			if c.api == "anthropic" && e.Type != "permission_error" {
				return "anthropic type " + e.Type + ", want permission_error"
			}
			return ""
		})
		if acao := resp.Header.Get("Access-Control-Allow-Origin"); acao != "" {
			t.Errorf("%s: a refused origin got Access-Control-Allow-Origin %q", c.path, acao)
		}
	}

	resp := browserRequest(t, "POST", st.URL()+"/v1/chat/completions", "http://localhost:3000", "", chat, nil)
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("http://localhost:3000: %d %s", resp.StatusCode, b)
	}
	if acao := resp.Header.Get("Access-Control-Allow-Origin"); acao != "http://localhost:3000" || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
		t.Errorf("allowed origin: Access-Control-Allow-Origin %q, Vary %q", acao, resp.Header.Get("Vary"))
	}
	resp = browserRequest(t, "POST", st.URL()+"/v1/chat/completions", "", "", chat, nil)
	if b := readAll(t, resp); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("no Origin: %d, Access-Control-Allow-Origin %q: %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
	}
	// The answer of an allowed page's failed request is readable by it.
	resp = browserRequest(t, "POST", st.URL()+"/v1/chat/completions", "http://127.0.0.1:5173", "", []byte(`{`), nil)
	if b := readAll(t, resp); resp.StatusCode != 400 || resp.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:5173" {
		t.Errorf("an allowed page's bad request: %d, Access-Control-Allow-Origin %q: %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
	}
}

// A preflight from an allowed origin is answered 204 with the CORS
// headers (the methods, the headers it asked for); from any other, 403
// without them, so the browser never sends the request.
func TestBrowserPreflight(t *testing.T) {
	st := startStack(t, app.Options{})
	preflight := func(origin string) *http.Response {
		return browserRequest(t, "OPTIONS", st.URL()+"/v1/chat/completions", origin, "", nil, map[string]string{
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "authorization,content-type,x-stainless-os",
		})
	}
	resp := preflight("http://localhost:3000")
	readAll(t, resp)
	h := resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "http://localhost:3000" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		h.Get("Access-Control-Allow-Headers") != "authorization,content-type,x-stainless-os" {
		t.Errorf("allowed preflight: %d %v", resp.StatusCode, h)
	}
	resp = preflight("https://evil.example")
	b := readAll(t, resp)
	expectError(t, "openai", resp.StatusCode, 403, b, nil)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("refused preflight carries CORS headers: %v", resp.Header)
	}
}

// DNS rebinding: a page whose name now points at 127.0.0.1 sends its own
// name as Host (and, on a same-origin GET, no Origin). A server bound to
// loopback answers 403 to any name but this machine's own.
func TestBrowserHostRebinding(t *testing.T) {
	st := startStack(t, app.Options{})
	port := st.Addr().String()[strings.LastIndexByte(st.Addr().String(), ':'):]
	for _, host := range []string{"evil.example" + port, "evil.example", "localhost.evil.example" + port, "127.0.0.1.nip.io" + port} {
		resp := browserRequest(t, "GET", st.URL()+"/v1/models", "", host, nil, nil)
		expectError(t, "openai", resp.StatusCode, 403, readAll(t, resp), nil)
		resp = browserRequest(t, "POST", st.URL()+"/api/chat", "", host, marshalBody(t, ollamaChatBody("hi")), nil)
		expectError(t, "ollama", resp.StatusCode, 403, readAll(t, resp), nil)
	}
	for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "[::1]" + port, "app.localhost" + port} {
		resp := browserRequest(t, "GET", st.URL()+"/v1/models", "", host, nil, nil)
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Errorf("Host %s: %d %s", host, resp.StatusCode, b)
		}
	}
}

// --allowed-origins adds an origin; the defaults stay, others still fail.
func TestBrowserAllowedOriginsOption(t *testing.T) {
	o := app.Options{}
	o.HTTP.AllowedOrigins = []string{"https://app.example.com", "https://*.tools.example"}
	st := startStack(t, o)
	for origin, want := range map[string]int{
		"https://app.example.com": 200, "https://ui.tools.example": 200, "http://localhost:8000": 200,
		"https://evil.example": 403, "http://app.example.com": 403,
	} {
		resp := browserRequest(t, "GET", st.URL()+"/v1/models", origin, "", nil, nil)
		readAll(t, resp)
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", origin, resp.StatusCode, want)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); (want == 200) != (got == origin) {
			t.Errorf("%s: Access-Control-Allow-Origin %q", origin, got)
		}
	}
}
