package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"
)

// client talks to one server. It is safe for concurrent use.
type client struct {
	base    string // URL without a trailing slash
	key     string
	http    *http.Client
	timeout time.Duration // per request
}

func newClient(cfg Config) *client {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = keepAliveClient(cfg.Concurrency + 4)
	}
	return &client{base: cfg.URL, key: cfg.APIKey, http: hc, timeout: cfg.Timeout}
}

// keepAliveClient keeps one idle connection per concurrent request, so a
// run measures the server, not TCP handshakes. Proxy is nil on purpose:
// HTTP_PROXY must not route a benchmark through another host.
func keepAliveClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // a gzip layer would buffer SSE events
	}}
}

// request is one POST.
type request struct {
	path  string
	body  any
	class string // X-Superfluid-Class; other servers ignore it
	// onSent runs once the request is on the wire; onHeaders once the
	// response status arrived (FIM waits on these for its background load).
	onSent, onHeaders func()
}

// httpError is a non-200 answer.
type httpError struct {
	Code int
	Msg  string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Msg) }

// missing reports whether the answer says the server lacks the endpoint
// (404, 405) or the feature (501: llama-server's /infill on a model without
// FIM tokens), the cases where another endpoint is worth trying.
func missing(err error) bool {
	var he *httpError
	return errors.As(err, &he) && (he.Code == http.StatusNotFound || he.Code == http.StatusMethodNotAllowed || he.Code == http.StatusNotImplemented)
}

// post sends rq and reads the whole answer (a stream or one JSON object)
// into an outcome; failures are in outcome.Err.
func (c *client) post(ctx context.Context, rq request) outcome {
	o := newOutcome()
	body, err := json.Marshal(rq.body)
	if err != nil {
		o.Err = err
		return o
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if rq.onSent != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { rq.onSent() }})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+rq.path, bytes.NewReader(body))
	if err != nil {
		o.Err = err
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	if rq.class != "" {
		req.Header.Set("X-Superfluid-Class", rq.class)
	}
	c.authorize(req)
	o.start = time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		o.end(time.Now(), c.describe(err, c.timeout))
		return o
	}
	defer resp.Body.Close()
	if rq.onHeaders != nil {
		rq.onHeaders()
	}
	if resp.StatusCode != http.StatusOK {
		o.end(time.Now(), readHTTPError(resp))
		return o
	}
	err = readEvents(resp, o.add)
	o.end(time.Now(), c.describe(err, c.timeout))
	return o
}

// postJSON sends body to a helper endpoint (/tokenize) and decodes its
// answer into v.
func (c *client) postJSON(ctx context.Context, path string, body, v any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPost, path, bytes.NewReader(b), v)
}

// get decodes a GET answer into v (nil: discard it).
func (c *client) get(ctx context.Context, path string, v any) error {
	return c.call(ctx, http.MethodGet, path, nil, v)
}

// call is a short request/answer exchange, bounded by 30 s at most.
func (c *client) call(ctx context.Context, method, path string, body io.Reader, v any) error {
	timeout := min(c.timeout, 30*time.Second)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return c.describe(err, timeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readHTTPError(resp)
	}
	if v == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return c.describe(err, timeout)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (c *client) authorize(req *http.Request) {
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
}

// describe turns a transport error into one line: an unreachable server
// says so with its URL, a timeout says after how long, and the rest lose
// net/url's `Post "…":` wrapping.
func (c *client) describe(err error, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("timed out after %s: %w", timeout, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("cannot reach %s: %w", c.base, op.Err)
	}
	return err
}

// readHTTPError words a non-200 answer from its error object (OpenAI's
// {"error":{"message"}}, Ollama's and llama.cpp's {"error":"…"}) or its text.
func readHTTPError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	var obj struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	msg := ""
	if json.Unmarshal(b, &obj) == nil {
		msg = errorText(obj.Error)
		if msg == "" {
			msg = obj.Message
		}
	}
	if msg == "" {
		msg = strings.TrimSpace(string(b))
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &httpError{Code: resp.StatusCode, Msg: strings.ReplaceAll(msg, "\n", " ")}
}

// errorText reads an "error" field that is a string or an object with a message.
func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(raw)
}
