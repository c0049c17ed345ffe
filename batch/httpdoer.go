package batch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	base := strings.TrimSuffix(strings.TrimSuffix(d.BaseURL, "/"), "/v1")
	req, err := http.NewRequestWithContext(ctx, method, base+url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("batch: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
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
	resp, err := c.Do(req)
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
