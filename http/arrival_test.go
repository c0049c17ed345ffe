package http

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"superfluid/sched"
	"superfluid/task"
)

// announceRecorder is a scheduler counting the announcements made,
// those still pending, and the submissions made.
type announceRecorder struct {
	*sched.Scheduler
	announced, pending, submits atomic.Int32
}

func (r *announceRecorder) Expect() func() {
	r.announced.Add(1)
	r.pending.Add(1)
	arrived := r.Scheduler.Expect()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.pending.Add(-1)
			arrived()
		})
	}
}

func (r *announceRecorder) Submit(ctx context.Context, req sched.Request) (*sched.Stream, error) {
	r.submits.Add(1)
	return r.Scheduler.Submit(ctx, req)
}

// Every generation route, and a batch's line, announces its request to the model's scheduler
// and settles the announcement once its work is submitted — while the
// request still waits for its reply, not when its handler returns — so an
// idle runner gathering a burst waits for requests on their way and never
// for one already queued. The scheduler here does not run until the
// announcement has settled: a route that settled only at its handler's
// end would never do so and the test fails at its deadline.
func TestGenerationRoutesSettleTheirAnnouncementOnSubmission(t *testing.T) {
	bodies := map[string]string{
		"/completion":          `{"prompt":"hello","n_predict":3}`,
		"/v1/completions":      `{"prompt":"hello","max_tokens":3}`,
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		"/v1/responses":        `{"input":"hi","max_output_tokens":16,"store":false}`,
		"/v1/messages":         `{"model":"toy","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`,
		"/api/generate":        `{"model":"toy","prompt":"hello","stream":false,"options":{"num_predict":3}}`,
		"/api/chat":            `{"model":"toy","messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":3}}`,
	}
	type send func(srv *Server, url string) int
	post := func(path, body string) send {
		return func(_ *Server, url string) int {
			resp, err := http.Post(url+path, "application/json", bytes.NewReader([]byte(body)))
			if err != nil {
				t.Errorf("POST %s: %v", path, err)
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
	}
	sends := map[string]send{
		// A batch's line takes the request core without an HTTP request.
		"batch line": func(srv *Server, _ string) int {
			status, _, err := srv.AnswerBatch(context.Background(), "/v1/chat/completions", []byte(bodies["/v1/chat/completions"]), "")
			if err != nil {
				t.Errorf("batch line: %v", err)
			}
			return status
		},
	}
	for path, body := range bodies {
		sends[path] = post(path, body)
	}
	for name, send := range sends {
		t.Run(name, func(t *testing.T) {
			var rec *announceRecorder
			ts := startToy(t, toyOptions{lanes: 2, paused: true, wrap: func(sc *sched.Scheduler) task.Scheduler {
				rec = &announceRecorder{Scheduler: sc}
				return rec
			}})
			answered := make(chan int, 1)
			go func() { answered <- send(ts.srv, ts.url) }()
			deadline := time.Now().Add(10 * time.Second)
			for rec.submits.Load() == 0 || rec.pending.Load() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d submissions, %d announcements pending while the request waits for its reply; want it settled at submission", rec.submits.Load(), rec.pending.Load())
				}
				time.Sleep(time.Millisecond)
			}
			ts.run()
			if code := <-answered; code != http.StatusOK {
				t.Fatalf("answered %d; want 200", code)
			}
			if n := rec.announced.Load(); n != 1 {
				t.Errorf("%d announcements; want the request's one", n)
			}
		})
	}
}
