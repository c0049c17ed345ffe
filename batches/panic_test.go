package batches

import (
	"context"
	"strings"
	"testing"
	"time"

	"superfluid/batch"
	"superfluid/panics"
)

// panickyDoer panics on a prompt starting with "boom" and answers the
// rest as fakeDoer does.
type panickyDoer struct{ fakeDoer }

func (d *panickyDoer) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	if strings.Contains(string(body), `"prompt":"boom`) {
		panic("fault handling this request")
	}
	return d.fakeDoer.Do(ctx, method, url, body)
}

// A request whose handling panics gets a 500 in OpenAI's shape: that
// request fails, the batch's others are answered, and the panic is counted.
func TestBatchesRequestPanicFailsOnlyThatRequest(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{Parallel: 2, RetryPause: time.Millisecond})
	before := panics.Count(panics.Batches)
	b := create(t, s, `{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":"one"}}
{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"boom"}}
{"custom_id":"c","method":"POST","url":"/v1/completions","body":{"prompt":"three"}}
`, batch.Completions)
	s.Start(&panickyDoer{})
	b = waitFor(t, s, b.ID, "finished", finished)
	if b.Status != StatusCompleted || b.RequestCounts != (RequestCounts{Total: 3, Completed: 2, Failed: 1}) {
		t.Fatalf("ended %s with %+v", b.Status, b.RequestCounts)
	}
	errs := records(t, s, b.ErrorFileID)
	if len(errs) != 1 || errs[0].CustomID != "b" || errs[0].Response == nil || errs[0].Response.StatusCode != 500 ||
		!strings.Contains(string(errs[0].Response.Body), "server_error") {
		t.Fatalf("error file: %+v", errs)
	}
	if panics.Count(panics.Batches) == before {
		t.Error("the panic was not counted")
	}
}

// A panic on the worker itself fails the batch it was running, with an
// internal_error, and the worker runs the next batch.
func TestBatchesWorkerPanicFailsOnlyThatBatch(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{Parallel: 2})
	first := create(t, s, completionLines(2), batch.Completions)
	second := create(t, s, completionLines(3), batch.Completions)
	beforeRun = func(id string) {
		if id == first.ID {
			panic("fault running this batch")
		}
	}
	t.Cleanup(func() { beforeRun = nil })
	before := panics.Count(panics.Batches)
	s.Start(&fakeDoer{})
	b := waitFor(t, s, first.ID, "finished", finished)
	if b.Status != StatusFailed || b.Errors == nil || len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != "internal_error" {
		t.Fatalf("the batch at fault ended %s, %+v", b.Status, b.Errors)
	}
	b = waitFor(t, s, second.ID, "finished", finished)
	if b.Status != StatusCompleted || b.RequestCounts.Completed != 3 {
		t.Fatalf("the next batch ended %s, %+v", b.Status, b.RequestCounts)
	}
	if got := panics.Count(panics.Batches) - before; got != 1 {
		t.Errorf("%d panics counted, want 1", got)
	}
}
