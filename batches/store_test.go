package batches

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"superfluid/batch"
)

// fakeDoer answers a completion with its prompt upper-cased; a prompt
// starting with "bad" gets a 400. After pass calls (when hold is set) every
// call waits for hold to close or its context to end.
type fakeDoer struct {
	mu       sync.Mutex
	calls    map[string]int
	total    atomic.Int32
	inflight atomic.Int32
	pass     int32
	hold     chan struct{}
	onCall   func(n int32) // after a call is answered, with the count
}

func (d *fakeDoer) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	d.inflight.Add(1)
	defer d.inflight.Add(-1)
	n := d.total.Add(1)
	if d.hold != nil && n > d.pass {
		select {
		case <-d.hold:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	var b struct{ Prompt string }
	json.Unmarshal(body, &b)
	d.mu.Lock()
	if d.calls == nil {
		d.calls = map[string]int{}
	}
	d.calls[b.Prompt]++
	d.mu.Unlock()
	if d.onCall != nil {
		defer d.onCall(n)
	}
	if strings.HasPrefix(b.Prompt, "bad") {
		return 400, []byte(`{"error":{"message":"bad prompt","type":"invalid_request_error","param":null,"code":null}}`), nil
	}
	out, _ := json.Marshal(map[string]any{"object": "text_completion", "url": url, "choices": []any{map[string]any{"text": strings.ToUpper(b.Prompt)}}})
	return 200, out, nil
}

func (d *fakeDoer) callsOf(prompt string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[prompt]
}

func openStore(t *testing.T, dir string, cfg Config) *Store {
	t.Helper()
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// completionLines are n OpenAI batch lines for /v1/completions.
func completionLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":"p%d"}}`+"\n", i, i)
	}
	return b.String()
}

func upload(t *testing.T, s *Store, content string) File {
	t.Helper()
	f, err := s.CreateFile("in.jsonl", PurposeBatch, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func create(t *testing.T, s *Store, content, endpoint string) Batch {
	t.Helper()
	f := upload(t, s, content)
	b, err := s.CreateBatch(BatchParams{InputFileID: f.ID, Endpoint: endpoint, CompletionWindow: "24h", Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls the batch until cond holds (a generous bound: a stuck
// batch fails, a slow machine does not).
func waitFor(t *testing.T, s *Store, id string, what string, cond func(Batch) bool) Batch {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := s.Batch(id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch never %s: %+v", what, b)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func finished(b Batch) bool { return b.Status.Finished() }

// records reads an output or error file; nil id reads nothing.
func records(t *testing.T, s *Store, id *string) []batch.Record {
	t.Helper()
	if id == nil {
		return nil
	}
	f, meta, err := s.OpenFile(*id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if meta.Purpose != PurposeBatchOutput {
		t.Errorf("file %s has purpose %q", *id, meta.Purpose)
	}
	var out []batch.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r batch.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", *id, sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func customIDs(rs []batch.Record) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.CustomID)
	}
	return ids
}

// A batch runs to completed: 2xx answers in the output file, everything
// else (a 400, a malformed line, a line for another endpoint) in the error
// file, both in input order; counts and timestamps as OpenAI's.
func TestBatchesLifecycle(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{Parallel: 3})
	in := `{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":"one"}}
{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"bad two"}}
not json
{"custom_id":"c","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}
{"custom_id":"d","method":"POST","url":"/v1/completions","body":{"prompt":"three"}}
{"prompt":"four"}
`
	b := create(t, s, in, batch.Completions)
	if b.Status != StatusInProgress || b.RequestCounts.Total != 6 || b.InProgressAt == nil || b.ExpiresAt == nil || *b.ExpiresAt != b.CreatedAt+86400 || b.Metadata["k"] != "v" {
		t.Fatalf("created: %+v", b)
	}
	d := &fakeDoer{}
	s.Start(d)
	b = waitFor(t, s, b.ID, "finished", finished)
	if b.Status != StatusCompleted || b.CompletedAt == nil || b.FinalizingAt == nil || b.Errors != nil {
		t.Fatalf("ended: %+v", b)
	}
	if b.RequestCounts != (RequestCounts{Total: 6, Completed: 3, Failed: 3}) {
		t.Fatalf("counts %+v", b.RequestCounts)
	}
	out, errs := records(t, s, b.OutputFileID), records(t, s, b.ErrorFileID)
	if got := strings.Join(customIDs(out), ","); got != "a,d,line-6" {
		t.Errorf("output: %s", got)
	}
	if got := strings.Join(customIDs(errs), ","); got != "b,line-3,c" {
		t.Errorf("errors: %s", got)
	}
	if !strings.Contains(string(out[0].Response.Body), "ONE") {
		t.Errorf("output body %s", out[0].Response.Body)
	}
	if errs[0].Response == nil || errs[0].Response.StatusCode != 400 {
		t.Errorf("the 400: %+v", errs[0])
	}
	if errs[2].Error == nil || !strings.Contains(errs[2].Error.Message, "does not match the batch's endpoint /v1/completions") {
		t.Errorf("the line for another endpoint: %+v", errs[2].Error)
	}
	if d.callsOf("") != 0 {
		t.Error("an invalid line was sent")
	}
	of, _ := s.File(*b.OutputFileID)
	ef, _ := s.File(*b.ErrorFileID)
	if of.Filename != b.ID+"_output.jsonl" || ef.Filename != b.ID+"_error.jsonl" || of.Object != "file" {
		t.Errorf("output files %+v %+v", of, ef)
	}
	// The object on disk says the same; the results file is gone.
	var disk Batch
	raw, _ := os.ReadFile(s.batchPath(b.ID))
	if err := json.Unmarshal(raw, &disk); err != nil || disk.Status != StatusCompleted || disk.RequestCounts != b.RequestCounts {
		t.Errorf("on disk: %s", raw)
	}
	if _, err := os.Stat(s.resultPath(b.ID)); !os.IsNotExist(err) {
		t.Errorf("results file left: %v", err)
	}
	if _, err := s.Cancel(b.ID); err == nil || err.Error() != "Cannot cancel a batch with status 'completed'." {
		t.Errorf("cancel after the end: %v", err)
	}
}

// All good: no error file.
func TestBatchesNoErrorFile(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{Parallel: 2})
	s.Start(&fakeDoer{})
	b := create(t, s, completionLines(5), batch.Completions)
	b = waitFor(t, s, b.ID, "finished", finished)
	if b.Status != StatusCompleted || b.ErrorFileID != nil || len(records(t, s, b.OutputFileID)) != 5 {
		t.Fatalf("%+v", b)
	}
}

// Cancelling a running batch stops it: cancelled, with the output of what
// was answered; requests in flight are abandoned.
func TestBatchesCancelMidRun(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{Parallel: 2})
	d := &fakeDoer{pass: 3, hold: make(chan struct{})}
	s.Start(d)
	b := create(t, s, completionLines(10), batch.Completions)
	waitFor(t, s, b.ID, "3 done", func(b Batch) bool { return b.RequestCounts.Completed == 3 })
	c, err := s.Cancel(b.ID)
	if err != nil || (c.Status != StatusCancelling && c.Status != StatusCancelled) || c.CancellingAt == nil {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	b = waitFor(t, s, b.ID, "finished", finished)
	if b.Status != StatusCancelled || b.CancelledAt == nil || b.RequestCounts != (RequestCounts{Total: 10, Completed: 3}) {
		t.Fatalf("%+v", b)
	}
	if out := records(t, s, b.OutputFileID); len(out) != 3 || b.ErrorFileID != nil {
		t.Fatalf("output %v, error file %v", customIDs(out), b.ErrorFileID)
	}
	if d.inflight.Load() != 0 {
		t.Error("requests still in flight after the cancel")
	}
	// A queued batch (the worker is free, but it never started: no Start)
	// is cancelled at once, with no output.
	s2 := openStore(t, t.TempDir(), Config{})
	q := create(t, s2, completionLines(2), batch.Completions)
	if c, err := s2.Cancel(q.ID); err != nil || c.Status != StatusCancelled || c.OutputFileID != nil {
		t.Fatalf("queued cancel: %+v %v", c, err)
	}
	if c, err := s2.Cancel(q.ID); err == nil || !strings.Contains(err.Error(), "'cancelled'") {
		t.Fatalf("second cancel: %+v %v", c, err)
	}
}

// Input the batch cannot run ends it failed at creation, with OpenAI's
// errors list.
func TestBatchesInputFails(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	dup := completionLines(2) + `{"custom_id":"req-0","method":"POST","url":"/v1/completions","body":{"prompt":"x"}}` + "\n"
	b := create(t, s, dup, batch.Completions)
	if b.Status != StatusFailed || b.FailedAt == nil || b.Errors == nil || b.Errors.Object != "list" || len(b.Errors.Data) != 1 {
		t.Fatalf("%+v", b)
	}
	if e := b.Errors.Data[0]; e.Code != "duplicate_custom_id" || e.Line == nil || *e.Line != 3 || !strings.Contains(e.Message, "req-0") {
		t.Fatalf("%+v", e)
	}
	b = create(t, s, "\n\n", batch.ChatCompletions)
	if b.Status != StatusFailed || b.Errors.Data[0].Code != "empty_file" {
		t.Fatalf("empty: %+v", b)
	}
}

// Requests the store refuses, and unknown ids.
func TestBatchesBadRequests(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	in := upload(t, s, completionLines(1))
	ud, err := s.CreateFile("notes.txt", PurposeUserData, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	good := BatchParams{InputFileID: in.ID, Endpoint: batch.Completions, CompletionWindow: "24h"}
	many := map[string]string{}
	for i := range 17 {
		many[fmt.Sprint(i)] = "x"
	}
	for name, c := range map[string]struct {
		edit  func(*BatchParams)
		param string
	}{
		"no input":        {func(p *BatchParams) { p.InputFileID = "" }, "input_file_id"},
		"moderations":     {func(p *BatchParams) { p.Endpoint = "/v1/moderations" }, "endpoint"},
		"no endpoint":     {func(p *BatchParams) { p.Endpoint = "" }, "endpoint"},
		"window 1h":       {func(p *BatchParams) { p.CompletionWindow = "1h" }, "completion_window"},
		"17 metadata":     {func(p *BatchParams) { p.Metadata = many }, "metadata"},
		"long key":        {func(p *BatchParams) { p.Metadata = map[string]string{strings.Repeat("k", 65): ""} }, "metadata"},
		"user_data input": {func(p *BatchParams) { p.InputFileID = ud.ID }, "input_file_id"},
	} {
		p := good
		c.edit(&p)
		var ie *InvalidError
		if _, err := s.CreateBatch(p); !errors.As(err, &ie) || ie.Param != c.param {
			t.Errorf("%s: %v", name, err)
		}
	}
	p := good
	p.InputFileID = "file-nope"
	if _, err := s.CreateBatch(p); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown input: %v", err)
	}
	for _, id := range []string{"batch_nope", "../../etc/passwd", ""} {
		if _, err := s.Batch(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("batch %q: %v", id, err)
		}
		if _, err := s.Cancel(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("cancel %q: %v", id, err)
		}
		if _, _, err := s.OpenFile(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("file %q: %v", id, err)
		}
		if err := s.DeleteFile(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("delete %q: %v", id, err)
		}
	}
	for _, purpose := range []string{"", "fine-tune", "batch_output"} {
		var ie *InvalidError
		if _, err := s.CreateFile("x.jsonl", purpose, strings.NewReader("{}")); !errors.As(err, &ie) || ie.Param != "purpose" {
			t.Errorf("purpose %q: %v", purpose, err)
		}
	}
	// The input of a batch still running cannot be deleted; once it ended
	// it can.
	b, err := s.CreateBatch(good)
	if err != nil {
		t.Fatal(err)
	}
	var ie *InvalidError
	if err := s.DeleteFile(in.ID); !errors.As(err, &ie) {
		t.Errorf("deleting a running batch's input: %v", err)
	}
	s.Cancel(b.ID)
	if err := s.DeleteFile(in.ID); err != nil {
		t.Errorf("deleting a finished batch's input: %v", err)
	}
	if _, err := os.Stat(s.filePath(in.ID)); !os.IsNotExist(err) {
		t.Errorf("content left: %v", err)
	}
	// A closed store refuses changes but still reads.
	s.Close()
	if _, err := s.CreateFile("x", PurposeBatch, strings.NewReader("")); !errors.Is(err, ErrClosed) {
		t.Errorf("upload after close: %v", err)
	}
	if _, err := s.Batch(b.ID); err != nil {
		t.Errorf("read after close: %v", err)
	}
}

// The server stops mid-batch and starts again: the batch resumes where its
// results file stops and every custom_id ends in the output exactly once;
// a damaged tail of the results file costs only the lines it damaged.
func TestBatchesRestartResumes(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Config{Parallel: 3})
	d := &fakeDoer{pass: 5, hold: make(chan struct{})}
	s.Start(d)
	lines := completionLines(20) + `{"custom_id":"bad","method":"POST","url":"/v1/completions","body":{"prompt":"bad one"}}` + "\n"
	b := create(t, s, lines, batch.Completions)
	waitFor(t, s, b.ID, "5 answered", func(b Batch) bool { return b.RequestCounts.Completed == 5 })
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d.inflight.Load() != 0 {
		t.Fatal("requests in flight after Close")
	}
	t.Logf("Close took %v", time.Since(start))
	var disk Batch
	raw, _ := os.ReadFile(s.batchPath(b.ID))
	if json.Unmarshal(raw, &disk); disk.Status != StatusInProgress || disk.RequestCounts.Completed != 5 {
		t.Fatalf("on disk after close: %s", raw)
	}
	// A kill could leave a line cut short; garbage must not stop the resume.
	f, _ := os.OpenFile(s.resultPath(b.ID), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("this is not json\n{\"custom_id\":\"req-1")
	f.Close()

	s2 := openStore(t, dir, Config{Parallel: 3})
	if got, _ := s2.Batch(b.ID); got.Status != StatusInProgress {
		t.Fatalf("reopened: %+v", got)
	}
	d2 := &fakeDoer{}
	s2.Start(d2)
	b = waitFor(t, s2, b.ID, "finished", finished)
	if b.Status != StatusCompleted || b.RequestCounts != (RequestCounts{Total: 21, Completed: 20, Failed: 1}) {
		t.Fatalf("%+v", b)
	}
	seen := map[string]int{}
	for _, r := range append(records(t, s2, b.OutputFileID), records(t, s2, b.ErrorFileID)...) {
		seen[r.CustomID]++
	}
	if len(seen) != 21 {
		t.Errorf("%d custom_ids in the output, want 21: %v", len(seen), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s answered %d times", id, n)
		}
	}
	if n := d2.total.Load(); n != 16 {
		t.Errorf("the resumed run sent %d requests, want 16 (21 less the 5 answered)", n)
	}
}

// A batch that was cancelling when the server stopped ends cancelled when
// it starts again; a batch object that cannot be read is ignored.
func TestBatchesRecoverCancelling(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Config{})
	b := create(t, s, completionLines(3), batch.Completions)
	s.Close()
	raw, _ := os.ReadFile(s.batchPath(b.ID))
	raw = bytes.Replace(raw, []byte(`"status":"in_progress"`), []byte(`"status":"cancelling"`), 1)
	os.WriteFile(s.batchPath(b.ID), raw, 0o644)
	os.WriteFile(filepath.Join(dir, "batches", "batch_garbage.json"), []byte("{nope"), 0o644)
	os.WriteFile(filepath.Join(dir, "files", "file-garbage.json"), []byte("]"), 0o644)
	s2 := openStore(t, dir, Config{})
	if got, err := s2.Batch(b.ID); err != nil || got.Status != StatusCancelled || got.CancelledAt == nil {
		t.Fatalf("%+v %v", got, err)
	}
	if page, _ := s2.Batches(ListParams{}); len(page.Data) != 1 {
		t.Fatalf("listed %d batches", len(page.Data))
	}
}

// A second store on the same directory is refused.
func TestBatchesLocked(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir, Config{})
	if _, err := Open(dir, Config{}); err == nil {
		t.Fatal("two stores on one directory")
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A batch not done within its 24 hours ends expired, with what it answered.
func TestBatchesExpiry(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	// Waiting its turn past the window: expired when the worker gets to it.
	s := openStore(t, t.TempDir(), Config{Now: clk.Now})
	b := create(t, s, completionLines(3), batch.Completions)
	clk.Add(25 * time.Hour)
	s.Start(&fakeDoer{})
	b = waitFor(t, s, b.ID, "finished", finished)
	if b.Status != StatusExpired || b.ExpiredAt == nil || *b.ExpiredAt != clk.Now().Unix() || b.OutputFileID != nil || b.RequestCounts.Failed != 3 {
		t.Fatalf("%+v", b)
	}
	for _, r := range records(t, s, b.ErrorFileID) {
		if r.Error == nil || r.Error.Code != "batch_expired" {
			t.Fatalf("an expired request's record: %+v", r)
		}
	}
	// Running past it: stopped at the next answer after the deadline (the
	// clock moves as the third call returns, which may be before the
	// second answer is counted).
	clk2 := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s2 := openStore(t, t.TempDir(), Config{Now: clk2.Now})
	d := &fakeDoer{onCall: func(n int32) {
		if n == 3 {
			clk2.Add(25 * time.Hour)
		}
	}}
	b = create(t, s2, completionLines(10), batch.Completions)
	s2.Start(d)
	b = waitFor(t, s2, b.ID, "finished", finished)
	out, errs := records(t, s2, b.OutputFileID), records(t, s2, b.ErrorFileID)
	if b.Status != StatusExpired || len(out) < 2 || len(out) >= 10 || b.RequestCounts != (RequestCounts{Total: 10, Completed: len(out), Failed: len(errs)}) {
		t.Fatalf("%+v, %d in the output", b, len(out))
	}
	if got := strings.Join(append(customIDs(out), customIDs(errs)...), ","); got != strings.Join(customIDs(mustRecords(completionLines(10))), ",") {
		t.Fatalf("output then errors: %s", got)
	}
}

// Lists: batches newest first in pages; files by purpose.
func TestBatchesList(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{})
	var ids []string
	for range 5 {
		ids = append(ids, create(t, s, completionLines(1), batch.Completions).ID)
	}
	p, err := s.Batches(ListParams{Limit: 2})
	if err != nil || len(p.Data) != 2 || !p.HasMore || p.Data[0].ID != ids[4] || *p.FirstID != ids[4] || *p.LastID != ids[3] || p.Object != "list" {
		t.Fatalf("page 1: %+v %v", p, err)
	}
	p, _ = s.Batches(ListParams{Limit: 2, After: *p.LastID})
	if len(p.Data) != 2 || !p.HasMore || p.Data[0].ID != ids[2] {
		t.Fatalf("page 2: %+v", p)
	}
	p, _ = s.Batches(ListParams{Limit: 2, After: *p.LastID})
	if len(p.Data) != 1 || p.HasMore || p.Data[0].ID != ids[0] {
		t.Fatalf("page 3: %+v", p)
	}
	p, _ = s.Batches(ListParams{After: ids[0]})
	if len(p.Data) != 0 || p.HasMore || p.FirstID != nil || p.Data == nil {
		t.Fatalf("past the end: %+v", p)
	}
	var ie *InvalidError
	for _, lp := range []ListParams{{Limit: 101}, {Limit: -1}, {After: "batch_nope"}} {
		if _, err := s.Batches(lp); !errors.As(err, &ie) {
			t.Errorf("%+v: %v", lp, err)
		}
	}
	if _, err := s.CreateFile("u.txt", PurposeUserData, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	fp, err := s.Files(ListParams{Purpose: PurposeBatch})
	if err != nil || len(fp.Data) != 5 {
		t.Fatalf("batch files: %+v %v", fp, err)
	}
	fp, _ = s.Files(ListParams{Order: "asc", Limit: 1})
	if len(fp.Data) != 1 || !fp.HasMore || fp.Data[0].Purpose != PurposeBatch {
		t.Fatalf("oldest file: %+v", fp)
	}
	// A file's content comes back as uploaded.
	f, meta, err := s.OpenFile(fp.Data[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != completionLines(1) || meta.Bytes != int64(len(got)) || meta.Filename != "in.jsonl" {
		t.Fatalf("content %q, %+v", got, meta)
	}
}

// mustRecords names the lines of an input as records (for comparing
// custom_id orders).
func mustRecords(in string) []batch.Record {
	reqs, err := batch.ReadInput(strings.NewReader(in))
	if err != nil {
		panic(err)
	}
	out := make([]batch.Record, len(reqs))
	for i, q := range reqs {
		out[i].CustomID = q.CustomID
	}
	return out
}

// flakyDoer answers 503 to the first failures calls for each prompt, then
// passes to fakeDoer.
type flakyDoer struct {
	fakeDoer
	failures int
	seen     sync.Map // prompt → *atomic.Int32
}

func (d *flakyDoer) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var b struct{ Prompt string }
	json.Unmarshal(body, &b)
	n, _ := d.seen.LoadOrStore(b.Prompt, new(atomic.Int32))
	if int(n.(*atomic.Int32).Add(1)) <= d.failures {
		return 503, []byte(`{"error":{"message":"busy"}}`), nil
	}
	return d.fakeDoer.Do(ctx, method, url, body)
}

// Requests that got no answer within the Runner's retries are sent again
// in later rounds before the batch completes: a server batch has no user
// to rerun it.
func TestBatchesRetryUnansweredRequestsBeforeCompleting(t *testing.T) {
	s := openStore(t, t.TempDir(), Config{Parallel: 2, Retries: 1, RetryPause: time.Millisecond})
	// Each request fails twice per Runner pass (1 retry) → answered in the
	// third pass, the second retry round.
	d := &flakyDoer{failures: 4}
	s.Start(d)
	b := create(t, s, completionLines(5), "/v1/completions")
	b = waitFor(t, s, b.ID, "completed", func(b Batch) bool { return b.Status.Finished() })
	if b.Status != StatusCompleted || b.ErrorFileID != nil || b.RequestCounts.Completed != 5 {
		t.Fatalf("batch %+v (errors file %v)", b.RequestCounts, b.ErrorFileID)
	}
	if out := records(t, s, b.OutputFileID); len(out) != 5 {
		t.Fatalf("%d output records", len(out))
	}
}
