package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// outcome is what one request measured: when its text arrived and the
// token counts the server reported (-1 where it reported none).
type outcome struct {
	start, first, last, done   time.Time // first/last: events carrying text
	events, chunks             int       // all events; those carrying text
	text                       []byte
	prompt, completion, cached int
	Err                        error
}

func newOutcome() outcome { return outcome{prompt: -1, completion: -1, cached: -1} }

func (o *outcome) end(at time.Time, err error) {
	o.done = at
	if o.Err == nil {
		o.Err = err
	}
}

// ttft is the time to the first text; ok is false when the answer was not
// streamed (one JSON object arrives whole, so there is no first token to
// time) or carried no text.
func (o *outcome) ttft() (time.Duration, bool) {
	if o.events < 2 || o.first.IsZero() {
		return 0, false
	}
	return o.first.Sub(o.start), true
}

func (o *outcome) latency() time.Duration { return o.done.Sub(o.start) }

// tokens is the completion length: the server's count, else the text
// events (llama-server and superfluid send one token per event).
func (o *outcome) tokens() int {
	if o.completion >= 0 {
		return o.completion
	}
	return o.chunks
}

// decodeRate is tokens after the first ÷ the time after the first: the
// steady decode speed, with the prompt's prefill left out.
func (o *outcome) decodeRate() (float64, bool) {
	n, d := o.tokens()-1, o.last.Sub(o.first)
	if n < 1 || d <= 0 || o.events < 2 {
		return 0, false
	}
	return float64(n) / d.Seconds(), true
}

// event is any one JSON object a supported server sends, whole or streamed:
// OpenAI completion and chat (chunks), llama.cpp /completion and /infill,
// Ollama /api/generate and /api/chat.
type event struct {
	Choices []struct {
		Text    string `json:"text"`
		Delta   oaText `json:"delta"`
		Message oaText `json:"message"`
	} `json:"choices"`
	Content  string  `json:"content"`  // llama.cpp
	Response string  `json:"response"` // Ollama /api/generate
	Message  *oaText `json:"message"`  // Ollama /api/chat
	Usage    *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Timings *struct { // llama.cpp: prompt_n excludes the cache_n reused tokens
		CacheN     *int `json:"cache_n"`
		PromptN    *int `json:"prompt_n"`
		PredictedN *int `json:"predicted_n"`
	} `json:"timings"`
	TokensEvaluated *int            `json:"tokens_evaluated"`  // llama.cpp: the whole prompt
	TokensPredicted *int            `json:"tokens_predicted"`  // llama.cpp
	PromptEvalCount *int            `json:"prompt_eval_count"` // Ollama
	EvalCount       *int            `json:"eval_count"`        // Ollama
	Error           json.RawMessage `json:"error"`
	Stop            bool            `json:"stop"` // llama.cpp: the stream's last event
	Done            bool            `json:"done"` // Ollama: the stream's last line
}

// last reports whether ev ends its stream: llama.cpp's "stop": true,
// Ollama's "done": true. OpenAI's end is the "data: [DONE]" line.
func (ev *event) last() bool { return ev.Stop || ev.Done }

// errTruncated is a stream that ended without its last event: the server
// closed it part-way (a crash, a cut connection), which a client must not
// take for a complete answer.
var errTruncated = errors.New("the stream ended before its last event")

type oaText struct {
	Content string `json:"content"`
}

func (ev *event) text() string {
	var b strings.Builder
	for _, c := range ev.Choices {
		b.WriteString(c.Text)
		b.WriteString(c.Delta.Content)
		b.WriteString(c.Message.Content)
	}
	b.WriteString(ev.Content)
	b.WriteString(ev.Response)
	if ev.Message != nil {
		b.WriteString(ev.Message.Content)
	}
	return b.String()
}

// counts returns the prompt, completion and cached-prompt tokens the event
// reports (-1: not reported), preferring OpenAI's usage, then llama.cpp's
// fields, then Ollama's. llama.cpp's tokens_cached is not read: it is the
// slot's n_past (prompt plus generated tokens), not the reused part.
func (ev *event) counts() (prompt, completion, cached int) {
	prompt, completion, cached = -1, -1, -1
	if u := ev.Usage; u != nil {
		prompt, completion = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			cached = u.PromptTokensDetails.CachedTokens
		}
	}
	if t := ev.Timings; t != nil {
		if cached < 0 && t.CacheN != nil {
			cached = *t.CacheN
		}
		if prompt < 0 && t.PromptN != nil && t.CacheN != nil {
			prompt = *t.PromptN + *t.CacheN
		}
		if completion < 0 && t.PredictedN != nil {
			completion = *t.PredictedN
		}
	}
	first := func(v *int, alts ...*int) {
		for _, a := range alts {
			if *v < 0 && a != nil {
				*v = *a
			}
		}
	}
	first(&prompt, ev.TokensEvaluated, ev.PromptEvalCount)
	first(&completion, ev.TokensPredicted, ev.EvalCount)
	return prompt, completion, cached
}

// add folds one event into the outcome; counts a later event reports
// replace earlier ones (the final event has the totals). An error object
// inside a stream ends the request with that error.
func (o *outcome) add(ev *event, at time.Time) error {
	if msg := errorText(ev.Error); msg != "" {
		return errors.New(msg)
	}
	o.events++
	if t := ev.text(); t != "" {
		if o.first.IsZero() {
			o.first = at
		}
		o.last = at
		o.chunks++
		o.text = append(o.text, t...)
	}
	p, c, k := ev.counts()
	for _, f := range []struct{ v, dst *int }{{&p, &o.prompt}, {&c, &o.completion}, {&k, &o.cached}} {
		if *f.v >= 0 {
			*f.dst = *f.v
		}
	}
	return nil
}

// readEvents calls fn for each JSON object of the answer: SSE data events
// (OpenAI, llama.cpp), newline-delimited JSON (Ollama) or one object. A
// stream that ends without its last event is errTruncated.
func readEvents(resp *http.Response, fn func(*event, time.Time) error) error {
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		return readSSE(resp.Body, fn)
	}
	stream := strings.HasPrefix(ct, "application/x-ndjson")
	dec := json.NewDecoder(resp.Body)
	ended := false
	for {
		var ev event
		err := dec.Decode(&ev)
		if err == io.EOF {
			if stream && !ended {
				return errTruncated
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the response: %w", err)
		}
		ended = ended || ev.last()
		if err := fn(&ev, time.Now()); err != nil {
			return err
		}
	}
}

// readSSE reads server-sent events until "data: [DONE]" or the end of the
// body, which must come after a last event (llama.cpp's "stop": true) or
// the stream is errTruncated. Multi-line data is joined; "error:" lines
// (llama-server) end the stream with their message.
func readSSE(r io.Reader, fn func(*event, time.Time) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	ended := false
	dispatch := func() error {
		if len(data) == 0 {
			return nil
		}
		var ev event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("reading the stream: %w", err)
		}
		data = data[:0]
		ended = ended || ev.last()
		return fn(&ev, time.Now())
	}
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if e := dispatch(); e != nil {
				return e
			}
		case strings.HasPrefix(line, "data:"):
			payload := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if payload == "[DONE]" {
				return dispatch()
			}
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, payload...)
		case strings.HasPrefix(line, "error:"):
			return errors.New(errorText(json.RawMessage(strings.TrimSpace(strings.TrimPrefix(line, "error:")))))
		}
		if err == io.EOF {
			if e := dispatch(); e != nil || ended {
				return e
			}
			return errTruncated
		}
		if err != nil {
			return fmt.Errorf("reading the stream: %w", err)
		}
	}
}
