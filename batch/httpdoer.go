package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// HTTPDoer sends requests to a running server (`superfluid batch --url`).
type HTTPDoer struct {
	BaseURL string // e.g. http://127.0.0.1:8080; a trailing /v1 is allowed
	APIKey  string
	// Class is sent as X-Superfluid-Class (superfluid's scheduling class;
	// other servers ignore it).
	Class  string
	Client *http.Client // default: http.DefaultClient
}

// Do posts body to the server.
func (d *HTTPDoer) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	resp, err := d.send(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("batch: reading the answer: %w", err)
	}
	return resp.StatusCode, b, nil
}

// Lanes asks the server how many requests it decodes at once (llama.cpp's
// /props total_slots); 4 when it does not say.
func (d *HTTPDoer) Lanes(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := d.send(ctx, "GET", "/props", nil)
	if err != nil {
		return 4
	}
	defer resp.Body.Close()
	var props struct {
		TotalSlots int `json:"total_slots"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&props) != nil || props.TotalSlots < 1 {
		return 4
	}
	return props.TotalSlots
}

// send makes a request to path under the server's base URL, with the key
// and class headers.
func (d *HTTPDoer) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	base := strings.TrimSuffix(strings.TrimSuffix(d.BaseURL, "/"), "/v1")
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if d.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.APIKey)
	}
	if d.Class != "" {
		req.Header.Set("X-Superfluid-Class", d.Class)
	}
	c := d.Client
	if c == nil {
		c = http.DefaultClient
	}
	return c.Do(req)
}
