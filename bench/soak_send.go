package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// soakResult is how one soak request ended.
type soakResult struct {
	// kind is "200" (a complete answer), another HTTP status, or what
	// ended it otherwise: hung-up (the client's own doing), stream-error,
	// truncated, malformed, timeout, refused (nothing listens), conn-error,
	// stopped (the run ended first).
	kind string
	msg  string // the server's or the transport's words
	// documented is the server saying "not now" the way it documents
	// (503, an overloaded or unavailable error event): not a failure.
	documented bool
}

// The kinds that are not HTTP statuses.
const (
	kindHungUp      = "hung-up"
	kindStreamError = "stream-error"
	kindTruncated   = "truncated"
	kindMalformed   = "malformed"
	kindTimeout     = "timeout"
	kindRefused     = "refused"
	kindConnError   = "conn-error"
	kindStopped     = "stopped"
)

// errHungUp ends a read the client chose to stop.
var errHungUp = errors.New("the client hung up")

// soakSend sends q and treats its answer the way q's behaviour says.
func (c *client) soakSend(ctx context.Context, q soakRequest) soakResult {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	reqCtx, closeConn := context.WithCancel(ctx) // cancelling a request closes its connection
	defer closeConn()
	var hung atomic.Bool
	hangUp := func() { hung.Store(true); closeConn() }
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, c.base+q.ep.path, bytes.NewReader(q.body))
	if err != nil {
		return soakResult{kind: kindConnError, msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Superfluid-Class", q.class)
	for k, v := range q.headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	c.authorize(req)
	if q.behave == hangUpEarly {
		t := time.AfterFunc(q.delay, hangUp)
		defer t.Stop()
	}
	resp, err := c.http.Do(req)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var he *httpError
			errors.As(readHTTPError(resp), &he)
			// 503, and a 429 that says when to retry (the FIM rate bucket),
			// are the server's documented "not now".
			notNow := resp.StatusCode == http.StatusServiceUnavailable ||
				resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != ""
			return soakResult{kind: strconv.Itoa(resp.StatusCode), msg: he.Msg, documented: notNow}
		}
		var body io.Reader = resp.Body
		if q.behave == readSlowly {
			body = &slowReader{ctx: reqCtx, r: resp.Body, seed: uint64(q.id)}
		}
		events := 0
		onText := func() error {
			if events++; q.behave == hangUpAfter && events >= q.events {
				hangUp()
				return errHungUp
			}
			return nil
		}
		res, rerr := readSoakAnswer(body, resp.Header.Get("Content-Type"), onText)
		if rerr == nil {
			return res
		}
		err = rerr
	}
	switch {
	case hung.Load():
		return soakResult{kind: kindHungUp}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return soakResult{kind: kindTimeout, msg: "no complete answer after " + c.timeout.String()}
	case ctx.Err() != nil:
		return soakResult{kind: kindStopped}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return soakResult{kind: kindRefused, msg: err.Error()}
	}
	return soakResult{kind: kindConnError, msg: c.describe(err, c.timeout).Error()}
}

// readSoakAnswer reads a 200 answer to its end: SSE events, NDJSON lines or
// one JSON object. onText runs for each event carrying text; its error
// stops the read. A transport error is returned as the error; what the
// server said is the result.
func readSoakAnswer(r io.Reader, contentType string, onText func() error) (soakResult, error) {
	sse := strings.HasPrefix(contentType, "text/event-stream")
	if !sse && !strings.HasPrefix(contentType, "application/x-ndjson") {
		b, err := io.ReadAll(r)
		if err != nil {
			return soakResult{}, err
		}
		if !json.Valid(b) {
			return soakResult{kind: kindMalformed, msg: "the answer is not JSON: " + clip(string(b))}, nil
		}
		return soakResult{kind: "200"}, nil
	}
	br := bufio.NewReaderSize(r, 64<<10)
	name := "" // the SSE event's name (Anthropic's "error")
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		payload, isData := strings.CutPrefix(line, "data:")
		switch {
		case !sse && line != "":
			payload, isData = line, true
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "error:"): // llama-server
			return streamError(json.RawMessage(strings.TrimSpace(strings.TrimPrefix(line, "error:")))), nil
		case line == "":
			name = ""
		}
		if isData {
			payload = strings.TrimSpace(payload)
			if payload == "[DONE]" {
				return drained(br, "200")
			}
			var ev map[string]any
			if json.Unmarshal([]byte(payload), &ev) != nil {
				return soakResult{kind: kindMalformed, msg: "an event is not JSON: " + clip(payload)}, nil
			}
			if e, ok := ev["error"]; (ok && e != nil) || ev["type"] == "error" || name == "error" {
				raw, _ := json.Marshal(ev)
				return streamError(raw), nil
			}
			if hasText(ev) {
				if err := onText(); err != nil {
					return soakResult{}, err
				}
			}
			if ev["stop"] == true || ev["done"] == true || ev["type"] == "message_stop" {
				return drained(br, "200")
			}
		}
		if err == io.EOF {
			return soakResult{kind: kindTruncated, msg: "the stream ended before its last event"}, nil
		}
		if err != nil {
			return soakResult{}, err
		}
	}
}

// drained reads what follows a stream's last event, so the connection
// can be reused, and returns kind.
func drained(r io.Reader, kind string) (soakResult, error) {
	_, err := io.Copy(io.Discard, r)
	return soakResult{kind: kind}, err
}

// streamError is an error event inside a 200 stream. One that says the
// server is overloaded or going away is its documented 503.
func streamError(raw json.RawMessage) soakResult {
	text := strings.ToLower(string(raw))
	documented := strings.Contains(text, "overloaded") || strings.Contains(text, "unavailable") || strings.Contains(text, "503")
	msg := errorText(raw)
	var obj struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &obj) == nil && len(obj.Error) > 0 {
		msg = errorText(obj.Error)
	}
	return soakResult{kind: kindStreamError, msg: clip(msg), documented: documented}
}

// hasText reports whether an event of any API carries generated text.
func hasText(ev map[string]any) bool {
	str := func(m any, k string) bool {
		o, _ := m.(map[string]any)
		s, _ := o[k].(string)
		return s != ""
	}
	if str(ev, "content") || str(ev, "response") || str(ev["message"], "content") || str(ev["delta"], "text") {
		return true
	}
	choices, _ := ev["choices"].([]any)
	for _, c := range choices {
		if m, _ := c.(map[string]any); str(m, "text") || str(m["delta"], "content") || str(m["message"], "content") {
			return true
		}
	}
	return false
}

// slowReader reads a few hundred bytes at a time with a pause before
// each: a client on a slow link, or one that renders as it reads. The
// pauses stay short, so it is slow, never stalled.
type slowReader struct {
	ctx  context.Context
	r    io.Reader
	seed uint64
	n    uint64
}

func (s *slowReader) Read(p []byte) (int, error) {
	s.n++
	pause := time.Duration(20+newRand(s.seed, streamSoak, s.n).IntN(80)) * time.Millisecond
	t := time.NewTimer(pause)
	select {
	case <-s.ctx.Done():
		t.Stop()
		return 0, s.ctx.Err()
	case <-t.C:
	}
	return s.r.Read(p[:min(len(p), 256)])
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
