package http

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"superfluid/status"
)

// The status routes are routes like the others: the API key applies, a
// foreign page's Origin is refused, and with both right the status of the
// model set answers.
func TestStatusRouteAuthAndOrigin(t *testing.T) {
	s, err := NewServer(Config{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	c := memServer(t, s)
	get := func(path string, header map[string]string) (int, []byte) {
		req, _ := nethttp.NewRequest("GET", "http://localhost"+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			return resp.StatusCode, []byte(line)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, path := range []string{"/v1/status", "/v1/status/events"} {
		if code, b := get(path, nil); code != 401 {
			t.Errorf("%s without the key: %d %s", path, code, b)
		}
		if code, b := get(path, map[string]string{"Authorization": "Bearer k", "Origin": "http://evil.example"}); code != 403 {
			t.Errorf("%s from a foreign page: %d %s", path, code, b)
		}
		if code, b := get(path, map[string]string{"Authorization": "Bearer k", "Origin": "http://localhost:3000"}); code != 200 {
			t.Errorf("%s with the key: %d %s", path, code, b)
		}
	}
	code, b := get("/v1/status", map[string]string{"x-api-key": "k"})
	var st status.Status
	if err := json.Unmarshal(b, &st); err != nil || code != 200 || len(st.Models) != 1 || st.Models[0].Name != m.Name {
		t.Fatalf("%d %s (%v)", code, b, err)
	}
}

// An event stream does not hold a shutdown's drain open: it ends when the
// server begins to stop.
func TestStatusEventsEndAtShutdown(t *testing.T) {
	s, err := NewServer(Config{Drain: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := stubModel(t)
	s.SetModel(m)
	c := memServer(t, s)
	req, _ := nethttp.NewRequest("GET", "http://localhost/v1/status/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "event: status\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatalf("the stream ended with %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v (the stream held the drain)", err)
	}
}
