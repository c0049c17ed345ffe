package status

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client reads a server's live status.
type Client struct {
	URL    string // the server's base URL, e.g. http://127.0.0.1:8080
	APIKey string // sent as a bearer token when set
	HTTP   *http.Client
}

// maxEvent bounds one status event (or body): a server that sends more is
// not one to trust with memory.
const maxEvent = 8 << 20

func (c *Client) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(c.URL, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &HTTPError{Status: resp.StatusCode, Message: errorMessage(b)}
	}
	return resp, nil
}

// HTTPError is a status route's refusal.
type HTTPError struct {
	Status  int
	Message string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("status: the server answered %d: %s", e.Status, e.Message)
}

// errorMessage is the message of an OpenAI-shaped error body, else the
// body itself.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(b))
}

// Fetch reads GET /v1/status once.
func (c *Client) Fetch(ctx context.Context) (*Status, error) {
	resp, err := c.get(ctx, "/v1/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxEvent)).Decode(&st); err != nil {
		return nil, fmt.Errorf("status: decoding %s/v1/status: %w", c.URL, err)
	}
	return &st, nil
}

// Follow reads GET /v1/status/events and calls fn with each status until
// ctx ends (nil) or the stream does (an error: the caller reconnects).
func (c *Client) Follow(ctx context.Context, fn func(*Status)) error {
	resp, err := c.get(ctx, "/v1/status/events")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = ReadEvents(resp.Body, fn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ErrStreamEnded is a status stream the server closed.
var ErrStreamEnded = errors.New("status: the event stream ended")

// ReadEvents decodes the "status" events of a server-sent event stream,
// calling fn with each, until r ends (ErrStreamEnded) or fails. Other
// events are skipped.
func ReadEvents(r io.Reader, fn func(*Status)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEvent)
	event := ""
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if (event == "" || event == "status") && data.Len() > 0 {
				var st Status
				if err := json.Unmarshal(data.Bytes(), &st); err != nil {
					return fmt.Errorf("status: decoding an event: %w", err)
				}
				fn(&st)
			}
			event = ""
			data.Reset()
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(line[len("data:"):], []byte(" ")))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("status: reading events: %w", err)
	}
	return ErrStreamEnded
}

// Reconnect is how long a follower waits before it tries again.
const Reconnect = time.Second
