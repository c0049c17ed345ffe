package batch

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// Record is one line of an output file, in OpenAI's batch output format:
// a response (whatever its status) or an error that kept the request from
// getting one.
type Record struct {
	ID       string       `json:"id"`
	CustomID string       `json:"custom_id"`
	Response *Response    `json:"response"`
	Error    *RecordError `json:"error"`
}

// Response is the answer a request got.
type Response struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

// RecordError is why a request got no answer.
type RecordError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of records.
const (
	// CodeInvalidRequest: the input line itself is malformed; rerunning
	// cannot help.
	CodeInvalidRequest = "invalid_request"
	// CodeRequestFailed: no answer after retries (the server was gone or
	// kept failing); a resumed run tries again.
	CodeRequestFailed = "request_failed"
)

// Succeeded reports a 2xx response.
func (r Record) Succeeded() bool {
	return r.Error == nil && r.Response != nil && r.Response.StatusCode >= 200 && r.Response.StatusCode < 300
}

// Final reports whether a resumed run keeps the record: answered, or
// refused for good (a malformed line, a 4xx about the request). Failures
// that are not the request's fault run again: no answer, a 5xx, a refused
// API key, a timeout or rate limit.
func (r Record) Final() bool {
	if r.Error != nil {
		return r.Error.Code != CodeRequestFailed
	}
	if r.Response == nil {
		return false
	}
	switch s := r.Response.StatusCode; s {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	default:
		return s < 500
	}
}

func newRecord(customID string) *Record {
	return &Record{ID: randomID("batch_req_"), CustomID: customID}
}

func randomID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// completionTokens reads usage.completion_tokens from a response body
// (chat and completions alike); 0 when absent.
func completionTokens(body []byte) int64 {
	var b struct {
		Usage struct {
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &b) != nil {
		return 0
	}
	return b.Usage.CompletionTokens
}
