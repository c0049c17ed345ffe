package bench

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, contentType, body string) (outcome, error) {
	t.Helper()
	o := newOutcome()
	o.start = time.Now()
	resp := &http.Response{Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(strings.NewReader(body))}
	err := readEvents(resp, o.add)
	o.end(time.Now(), err)
	return o, err
}

func TestSSEWithUsageAndDone(t *testing.T) {
	body := "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		": a comment\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":7}}}\n\n" +
		"data: [DONE]\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"after done\"}}]}\n\n"
	o, err := readAll(t, "text/event-stream; charset=utf-8", body)
	if err != nil || string(o.text) != "Hello" || o.chunks != 2 || o.prompt != 10 || o.completion != 2 || o.cached != 7 {
		t.Fatalf("err %v text %q chunks %d counts %d/%d/%d", err, o.text, o.chunks, o.prompt, o.completion, o.cached)
	}
	if _, ok := o.ttft(); !ok {
		t.Fatal("a stream's TTFT is measured")
	}
}

func TestSSEMultiLineDataAndErrors(t *testing.T) {
	o, err := readAll(t, "text/event-stream", "data: {\"content\":\ndata: \"x\",\"stop\":true}\n\n")
	if err != nil || string(o.text) != "x" {
		t.Fatalf("multi-line data: %q %v", o.text, err)
	}
	_, err = readAll(t, "text/event-stream", "data: {\"content\":\"x\"}\n\nerror: {\"code\":500,\"message\":\"boom\"}\n\n")
	if err == nil || err.Error() != "boom" {
		t.Fatalf("llama-server error line: %v", err)
	}
	_, err = readAll(t, "text/event-stream", "data: {\"error\":{\"message\":\"context full\"}}\n\n")
	if err == nil || err.Error() != "context full" {
		t.Fatalf("error object in a stream: %v", err)
	}
}

// A stream cut before its last event (the server died, the connection was
// cut) is a failure, never a short answer: OpenAI's without "data: [DONE]",
// llama.cpp's without "stop": true, Ollama's without "done": true.
func TestTruncatedStreamsFail(t *testing.T) {
	for _, c := range []struct{ name, contentType, body string }{
		{"openai", "text/event-stream", "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"},
		{"llama.cpp", "text/event-stream", "data: {\"content\":\"a\",\"stop\":false}\n\ndata: {\"content\":\"b\",\"stop\":false}\n\n"},
		{"ollama", "application/x-ndjson", "{\"response\":\"a\",\"done\":false}\n"},
	} {
		if _, err := readAll(t, c.contentType, c.body); err != errTruncated {
			t.Errorf("%s: a stream without its last event: err %v, want %v", c.name, err, errTruncated)
		}
	}
	if o, err := readAll(t, "text/event-stream", "data: {\"content\":\"a\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true}\n\n"); err != nil || string(o.text) != "a" {
		t.Errorf("llama.cpp's complete stream: %q %v", o.text, err)
	}
}

func TestLlamaCppAndOllamaCounts(t *testing.T) {
	// llama.cpp: prompt = prompt_n + cache_n; tokens_cached (n_past) is ignored.
	o, _ := readAll(t, "application/json", `{"content":"abc","tokens_cached":99,"timings":{"prompt_n":3,"cache_n":5,"predicted_n":4}}`)
	if o.prompt != 8 || o.cached != 5 || o.completion != 4 {
		t.Fatalf("llama.cpp counts %d/%d/%d", o.prompt, o.completion, o.cached)
	}
	if _, ok := o.ttft(); ok {
		t.Fatal("one whole JSON object has no first-token time")
	}
	o, _ = readAll(t, "application/json", `{"content":"abc","tokens_evaluated":12,"timings":{"prompt_n":3,"predicted_n":4}}`)
	if o.prompt != 12 || o.cached != -1 {
		t.Fatalf("tokens_evaluated: %d cached %d", o.prompt, o.cached)
	}
	o, _ = readAll(t, "application/x-ndjson", "{\"response\":\"a\",\"done\":false}\n{\"response\":\"b\",\"done\":false}\n{\"response\":\"\",\"done\":true,\"prompt_eval_count\":20,\"eval_count\":2}\n")
	if string(o.text) != "ab" || o.prompt != 20 || o.completion != 2 || o.cached != -1 || o.events != 3 {
		t.Fatalf("ollama: %q %d/%d/%d", o.text, o.prompt, o.completion, o.cached)
	}
	if _, err := readAll(t, "application/json", `{"content":`); err == nil {
		t.Fatal("a truncated answer is an error")
	}
}

func TestDecodeRateLeavesOutTheFirstToken(t *testing.T) {
	t0 := time.Now()
	o := outcome{start: t0, first: t0.Add(time.Second), last: t0.Add(3 * time.Second), events: 5, chunks: 5, completion: 5}
	if r, ok := o.decodeRate(); !ok || r != 2 {
		t.Fatalf("4 tokens after the first in 2 s: %v %v", r, ok)
	}
	o.completion = -1
	o.chunks = 1
	if _, ok := o.decodeRate(); ok {
		t.Fatal("one token has no decode rate")
	}
}
