package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The endpoints a batch line may name.
const (
	ChatCompletions = "/v1/chat/completions"
	Completions     = "/v1/completions"
	Embeddings      = "/v1/embeddings"
)

// Request is one line of an input file.
type Request struct {
	Line     int // 1-based
	CustomID string
	Method   string
	URL      string
	Body     json.RawMessage
	// Invalid says why the line cannot run; such a line is answered by an
	// error record instead of aborting the batch.
	Invalid string
}

// ErrDuplicateID is wrapped by ReadInput when two lines share a custom_id:
// their answers could not be told apart, and a resumed run could not know
// which one was done. OpenAI refuses such a file too.
var ErrDuplicateID = errors.New("duplicate custom_id")

// DuplicateIDError names the lines that share a custom_id.
type DuplicateIDError struct {
	CustomID        string
	Line, FirstLine int
}

func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("batch: line %d: custom_id %q is already used on line %d", e.Line, e.CustomID, e.FirstLine)
}

// Unwrap makes errors.Is(err, ErrDuplicateID) hold.
func (e *DuplicateIDError) Unwrap() error { return ErrDuplicateID }

// ReadInput parses a JSONL input. Each line is either the OpenAI batch form
// {"custom_id", "method": "POST", "url", "body"} or a bare request body:
// {"prompt": …} for /v1/completions, {"messages": …} for
// /v1/chat/completions, {"input": …} for /v1/embeddings, with an optional
// custom_id. A line without a
// custom_id is named "line-N". Blank lines are skipped. ReadInput fails
// only on a read error or a duplicate custom_id.
func ReadInput(r io.Reader) ([]Request, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Request
	seen := map[string]int{}
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			req := parseLine(n, line)
			if first, dup := seen[req.CustomID]; dup {
				return nil, &DuplicateIDError{CustomID: req.CustomID, Line: n, FirstLine: first}
			}
			seen[req.CustomID] = n
			out = append(out, req)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("batch: reading line %d: %w", n, err)
		}
	}
}

func parseLine(n int, line []byte) Request {
	req := Request{Line: n, CustomID: "line-" + strconv.Itoa(n), Method: "POST"}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		req.Invalid = fmt.Sprintf("line %d is not a JSON object: %v", n, err)
		return req
	}
	if raw, ok := fields["custom_id"]; ok {
		var id string
		if err := json.Unmarshal(raw, &id); err != nil || id == "" {
			req.Invalid = fmt.Sprintf("line %d: custom_id must be a non-empty string", n)
			return req
		}
		req.CustomID = id
	}
	_, hasBody := fields["body"]
	_, hasURL := fields["url"]
	if hasBody || hasURL {
		req.Invalid = parseEnvelope(&req, fields)
	} else {
		req.Invalid = parseBare(&req, fields)
	}
	if req.Invalid == "" {
		req.Invalid = checkBody(req.Body)
	}
	if req.Invalid != "" {
		req.Invalid = fmt.Sprintf("line %d: %s", n, req.Invalid)
	}
	return req
}

// parseEnvelope reads the OpenAI batch form.
func parseEnvelope(req *Request, f map[string]json.RawMessage) string {
	if _, ok := f["custom_id"]; !ok {
		return "custom_id is required"
	}
	if raw, ok := f["method"]; ok {
		if err := json.Unmarshal(raw, &req.Method); err != nil || req.Method != "POST" {
			return `method must be "POST"`
		}
	}
	if err := json.Unmarshal(f["url"], &req.URL); err != nil {
		return "url must be a string"
	}
	if req.URL != ChatCompletions && req.URL != Completions && req.URL != Embeddings {
		return fmt.Sprintf("url %q is not supported; use %s, %s or %s", req.URL, ChatCompletions, Completions, Embeddings)
	}
	req.Body = f["body"]
	return ""
}

// parseBare reads a line that is a request body itself.
func parseBare(req *Request, f map[string]json.RawMessage) string {
	_, prompt := f["prompt"]
	_, messages := f["messages"]
	_, input := f["input"]
	switch {
	case prompt && messages, prompt && input, messages && input:
		return `a line has one of "prompt", "messages" or "input"`
	case prompt:
		req.URL = Completions
	case messages:
		req.URL = ChatCompletions
	case input:
		req.URL = Embeddings
	default:
		return `want {"custom_id", "method", "url", "body"} or a request with "prompt", "messages" or "input"`
	}
	delete(f, "custom_id")
	body, err := json.Marshal(f)
	if err != nil {
		return err.Error()
	}
	req.Body = body
	return ""
}

// checkBody refuses what a batch cannot carry: no body, or a streamed one
// (a batch answers with whole responses).
func checkBody(body json.RawMessage) string {
	var b struct {
		Stream *bool `json:"stream"`
	}
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &b) != nil {
		return "body must be a JSON object"
	}
	if b.Stream != nil && *b.Stream {
		return "stream is not supported in a batch"
	}
	return ""
}
