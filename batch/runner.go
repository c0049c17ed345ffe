package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Doer sends one request and returns the answer's status and body. An
// error means there was no answer (the server unreachable, the context
// ended).
type Doer interface {
	Do(ctx context.Context, method, url string, body []byte) (status int, resp []byte, err error)
}

// DoerFunc adapts a function to Doer.
type DoerFunc func(ctx context.Context, method, url string, body []byte) (int, []byte, error)

// Do calls f.
func (f DoerFunc) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	return f(ctx, method, url, body)
}

// Runner runs requests through a Doer.
type Runner struct {
	Doer Doer
	// Parallel is how many requests are in flight at once (default 1).
	// More than the server's lanes keeps every lane busy: the next request
	// waits in the queue, not in the client.
	Parallel int
	// Retries is how often a request that got no answer, or a 429/502/503/504,
	// is sent again before its record says it failed (default 2).
	Retries int
	// Backoff is the first wait before a retry; it doubles (default 500ms).
	Backoff time.Duration
	// OnProgress, when set, is called after each record is written (from
	// one goroutine).
	OnProgress func(Progress)
}

// Progress counts a run.
type Progress struct {
	Total   int   // requests in the input
	Done    int   // answered in the output, including Resumed
	Resumed int   // already answered when the run started
	Failed  int   // records this run wrote that are not a 2xx response
	Retry   int   // of those, the ones a rerun sends again (not Final)
	Tokens  int64 // completion tokens generated in this run
	Elapsed time.Duration
}

// Run answers every request the output does not, appending a record as each
// ends. Cancelling ctx stops it promptly: requests in flight are abandoned
// and left for the next run, and the output stays valid. It returns the
// final progress and ctx's error when cancelled, or the first write error.
func (r *Runner) Run(ctx context.Context, reqs []Request, out *Output) (Progress, error) {
	start := time.Now()
	p := Progress{Total: len(reqs)}
	var pending []Request
	for _, q := range reqs {
		if out.Done(q.CustomID) {
			p.Done++
			p.Resumed++
			continue
		}
		pending = append(pending, q)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan Request)
	results := make(chan *Record)
	var wg sync.WaitGroup
	for range max(r.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range jobs {
				if rec := r.answer(ctx, q); rec != nil {
					select {
					case results <- rec:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, q := range pending {
			select {
			case jobs <- q:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	var werr error
	for rec := range results {
		if werr != nil {
			continue // draining after a failed write
		}
		if err := out.Append(rec); err != nil {
			werr = err
			cancel()
			continue
		}
		p.Done++
		if !rec.Succeeded() {
			p.Failed++
		}
		if !rec.Final() {
			p.Retry++
		}
		if rec.Response != nil {
			p.Tokens += completionTokens(rec.Response.Body)
		}
		p.Elapsed = time.Since(start)
		if r.OnProgress != nil {
			r.OnProgress(p)
		}
	}
	p.Elapsed = time.Since(start)
	if werr != nil {
		return p, werr
	}
	return p, ctx.Err()
}

// answer runs one request; nil when ctx ended first (the request is left
// for the next run).
func (r *Runner) answer(ctx context.Context, q Request) *Record {
	rec := newRecord(q.CustomID)
	if q.Invalid != "" {
		rec.Error = &RecordError{Code: CodeInvalidRequest, Message: q.Invalid}
		return rec
	}
	retries, wait := r.Retries, r.Backoff
	if retries == 0 {
		retries = 2
	}
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	for attempt := 0; ; attempt++ {
		status, body, err := r.Doer.Do(ctx, q.Method, q.URL, q.Body)
		if ctx.Err() != nil {
			return nil
		}
		retry := err != nil || status == http.StatusTooManyRequests || status == http.StatusBadGateway ||
			status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
		if !retry || attempt >= retries {
			if err != nil {
				rec.Error = &RecordError{Code: CodeRequestFailed, Message: fmt.Sprintf("no answer after %d attempts: %v", attempt+1, err)}
			} else {
				rec.Response = &Response{StatusCode: status, RequestID: randomID("req_"), Body: jsonBody(body)}
			}
			return rec
		}
		select {
		case <-time.After(wait):
			wait *= 2
		case <-ctx.Done():
			return nil
		}
	}
}

// jsonBody keeps a JSON body as it is and wraps anything else as a JSON
// string, so that a record is always one valid line.
func jsonBody(b []byte) json.RawMessage {
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
