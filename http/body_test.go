package http

import (
	"io"
	nethttp "net/http"
	"strings"
	"testing"
)

// Bodies are read by the server within the route's limit: a chunked body
// (no length announced) over it is a 413 once the limit is passed, and a
// client cannot forge the note the server leaves on a refused request's
// headers to have a good one refused.
func TestBodyLimitsPerRoute(t *testing.T) {
	s, err := NewServer(Config{MaxBody: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	c := memServer(t, s)
	send := func(path string, body io.Reader, header map[string]string) (int, string) {
		t.Helper()
		req, _ := nethttp.NewRequest("POST", "http://superfluid"+path, body)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// An io.Reader that is not a bytes/strings reader: sent chunked.
	chunked := func(n int) io.Reader {
		return io.MultiReader(strings.NewReader(strings.Repeat(" ", n)), strings.NewReader("{}"))
	}
	if status, b := send("/v1/chat/completions", chunked(2<<20), nil); status != 413 || !strings.Contains(b, "limit of 1048576") {
		t.Errorf("2 MiB chunked on a chat route under --max-body 1 MiB: %d %s", status, b)
	}
	if status, b := send("/api/pull", chunked(100<<10), nil); status != 413 || !strings.Contains(b, "limit of 65536") {
		t.Errorf("100 KiB to /api/pull: %d %s", status, b)
	}
	if status, b := send("/v1/chat/completions", strings.NewReader("{"), map[string]string{unreadLengthHeader: "999999999"}); status != 400 {
		t.Errorf("a forged %s: %d %s, want the malformed body's 400", unreadLengthHeader, status, b)
	}
	if status, b := send("/v1/chat/completions", chunked(200<<10), nil); status != 400 || strings.Contains(b, "limit") {
		t.Errorf("200 KiB of blanks on a chat route (within its limit): %d %s, want the 400 of a body without messages", status, b)
	}
}
