package http

import (
	"io"
	nethttp "net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// The built-in page is mounted: a browser's GET / gets it and its files,
// even while the model loads and without an API key; every other client
// still gets Ollama's text.
func TestServerServesThePage(t *testing.T) {
	s, err := NewServer(Config{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	c := memServer(t, s)
	get := func(path, accept string) (int, string, string) {
		req, err := nethttp.NewRequest("GET", "http://superfluid"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	if status, ct, body := get("/", "text/html,*/*;q=0.8"); status != 200 || !strings.HasPrefix(ct, "text/html") || !strings.Contains(body, "/ui/app.js") {
		t.Errorf("a browser's GET /: %d %s %.100s", status, ct, body)
	}
	if status, _, body := get("/", ""); status != 200 || body != "Ollama is running" {
		t.Errorf("a probe's GET /: %d %q", status, body)
	}
	if status, ct, _ := get("/ui/app.js", "*/*"); status != 200 || !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("GET /ui/app.js: %d %s", status, ct)
	}
	if status, _, _ := get("/v1/models", ""); status != 401 && status != 503 {
		t.Errorf("the API still wants its key: /v1/models answered %d", status)
	}
}

// A page reached at the server's IP address (a server bound beyond
// loopback) sends an Origin naming that address: admitted. Another
// site's is not.
func TestAdmitSameOriginPage(t *testing.T) {
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for origin, refused := range map[string]bool{
		"http://10.0.0.2:8080":  false,
		"http://10.0.0.3:8080":  true,
		"http://evil.example":   true,
		"http://localhost:5173": false,
	} {
		var h fasthttp.RequestHeader
		h.SetMethod("GET")
		h.SetHost("10.0.0.2:8080")
		h.Set("Origin", origin)
		a := s.admit(&h, "/v1/models")
		if (a.refuse != nil) != refused {
			t.Errorf("Origin %s at Host 10.0.0.2:8080: refused %v, want %v", origin, a.refuse, refused)
		}
	}
}
