package batch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoDoer answers every request with its body's prompt reversed, as a
// completion with usage, after failing the first failFirst calls of each
// prompt with the given status (0: a transport error).
type echoDoer struct {
	mu        sync.Mutex
	calls     map[string]int
	failFirst int
	failWith  int
	inflight  atomic.Int32
	peak      atomic.Int32
	block     chan struct{} // when set, every call waits for it or ctx
	started   chan struct{} // when set, every call signals its start
}

func (d *echoDoer) Do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	n := d.inflight.Add(1)
	defer d.inflight.Add(-1)
	for p := d.peak.Load(); n > p && !d.peak.CompareAndSwap(p, n); p = d.peak.Load() {
	}
	if d.started != nil {
		d.started <- struct{}{}
	}
	if d.block != nil {
		select {
		case <-d.block:
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
	calls := d.calls[b.Prompt]
	d.mu.Unlock()
	if calls <= d.failFirst {
		if d.failWith == 0 {
			return 0, nil, errors.New("connection refused")
		}
		return d.failWith, []byte(`{"error":{"message":"busy"}}`), nil
	}
	r := []rune(b.Prompt)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	out, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"text": string(r)}}, "usage": map[string]int{"completion_tokens": len(r)}})
	return 200, out, nil
}

func promptsInput(n int) []Request {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"r%d","method":"POST","url":"/v1/completions","body":{"prompt":"p%03d"}}`+"\n", i, i)
	}
	reqs, err := ReadInput(strings.NewReader(b.String()))
	if err != nil {
		panic(err)
	}
	return reqs
}

func readRecords(t *testing.T, path string) map[string]Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]Record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		if _, dup := out[r.CustomID]; dup {
			t.Fatalf("custom_id %q written twice", r.CustomID)
		}
		out[r.CustomID] = r
	}
	return out
}

func TestRunAnswersEveryRequestWithinParallel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, err := OpenOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &echoDoer{}
	var calls int
	r := &Runner{Doer: d, Parallel: 3, OnProgress: func(Progress) { calls++ }}
	p, err := r.Run(context.Background(), promptsInput(50), out)
	if err != nil || out.Close() != nil {
		t.Fatal(err)
	}
	if p.Done != 50 || p.Failed != 0 || p.Tokens != 50*4 || calls != 50 {
		t.Fatalf("progress %+v after %d callbacks", p, calls)
	}
	if peak := d.peak.Load(); peak > 3 {
		t.Fatalf("%d requests in flight, want at most 3", peak)
	}
	recs := readRecords(t, path)
	for i := range 50 {
		rec := recs[fmt.Sprintf("r%d", i)]
		var body struct{ Choices []struct{ Text string } }
		json.Unmarshal(rec.Response.Body, &body)
		if !rec.Succeeded() || body.Choices[0].Text != reverse(fmt.Sprintf("p%03d", i)) || !strings.HasPrefix(rec.ID, "batch_req_") {
			t.Fatalf("record r%d = %+v", i, rec)
		}
	}
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// An interrupted run leaves a valid file; the rerun writes exactly the rest.
func TestRunInterruptedThenResumed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	reqs := promptsInput(40)
	out, _ := OpenOutput(path)
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{Doer: &echoDoer{}, Parallel: 4, OnProgress: func(p Progress) {
		if p.Done == 17 {
			cancel()
		}
	}}
	p, err := r.Run(ctx, reqs, out)
	out.Close()
	if !errors.Is(err, context.Canceled) || p.Done < 17 || p.Done == 40 {
		t.Fatalf("first run: %+v, %v", p, err)
	}
	first := len(readRecords(t, path))
	if first != p.Done {
		t.Fatalf("file has %d records, progress says %d", first, p.Done)
	}
	out, err = OpenOutput(path)
	if err != nil || out.Len() != first {
		t.Fatalf("reopened: %d done, %v", out.Len(), err)
	}
	d := &echoDoer{}
	p, err = (&Runner{Doer: d, Parallel: 4}).Run(context.Background(), reqs, out)
	out.Close()
	if err != nil || p.Done != 40 || p.Resumed != first {
		t.Fatalf("second run: %+v, %v", p, err)
	}
	if len(d.calls) != 40-first {
		t.Fatalf("second run sent %d requests, want %d", len(d.calls), 40-first)
	}
	if got := len(readRecords(t, path)); got != 40 {
		t.Fatalf("%d records, want 40", got)
	}
}

func TestRunRetriesThenRecordsFailure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failFirst int
		failWith  int
		ok        bool
	}{
		{"transport error recovers", 2, 0, true},
		{"503 recovers", 1, 503, true},
		{"transport error persists", 5, 0, false},
		{"503 persists", 5, 503, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			out, _ := OpenOutput(path)
			r := &Runner{Doer: &echoDoer{failFirst: tc.failFirst, failWith: tc.failWith}, Parallel: 2, Backoff: time.Millisecond}
			p, err := r.Run(context.Background(), promptsInput(3), out)
			out.Close()
			if err != nil || p.Done != 3 || (p.Failed == 0) != tc.ok {
				t.Fatalf("progress %+v, %v", p, err)
			}
			for _, rec := range readRecords(t, path) {
				if rec.Succeeded() != tc.ok || rec.Final() != tc.ok {
					t.Fatalf("record %+v (response %+v, error %+v)", rec, rec.Response, rec.Error)
				}
			}
			// Failures are tried again by the next run.
			out, _ = OpenOutput(path)
			if want := map[bool]int{true: 3, false: 0}[tc.ok]; out.Len() != want {
				t.Fatalf("reopened with %d done, want %d", out.Len(), want)
			}
			out.Close()
		})
	}
}

func TestRunWritesErrorRecordsForInvalidLines(t *testing.T) {
	reqs, _ := ReadInput(strings.NewReader("{\"prompt\":\"ok\"}\nnot json\n{\"custom_id\":\"e\",\"url\":\"/v1/files\",\"body\":{}}\n"))
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path)
	p, err := (&Runner{Doer: &echoDoer{}}).Run(context.Background(), reqs, out)
	out.Close()
	if err != nil || p.Done != 3 || p.Failed != 2 {
		t.Fatalf("%+v, %v", p, err)
	}
	recs := readRecords(t, path)
	for _, id := range []string{"line-2", "e"} {
		rec := recs[id]
		if rec.Error == nil || rec.Error.Code != CodeInvalidRequest || rec.Response != nil || !rec.Final() {
			t.Fatalf("record %q = %+v", id, rec)
		}
	}
	if !recs["line-1"].Succeeded() {
		t.Fatalf("line-1 = %+v", recs["line-1"])
	}
}

func TestOpenOutputDropsWhatCannotBeTrusted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	ok := func(id string) string {
		return fmt.Sprintf(`{"id":"batch_req_1","custom_id":%q,"response":{"status_code":200,"request_id":"r","body":{}},"error":null}`, id)
	}
	content := ok("a") + "\n" +
		`{"id":"x","custom_id":"b","response":null,"error":{"code":"request_failed","message":"gone"}}` + "\n" +
		`{"id":"x","custom_id":"c","response":{"status_code":500,"request_id":"r","body":{}},"error":null}` + "\n" +
		`{"id":"x","custom_id":"d","response":{"status_code":400,"request_id":"r","body":{}},"error":null}` + "\n" +
		ok("a") + "\n" +
		ok("e")[:30] // cut short by a kill
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := OpenOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"a": true, "b": false, "c": false, "d": true, "e": false} {
		if out.Done(id) != want {
			t.Errorf("Done(%q) = %v, want %v", id, !want, want)
		}
	}
	if err := out.Append(&Record{ID: "batch_req_2", CustomID: "e", Response: &Response{StatusCode: 200, Body: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	out.Close()
	b, _ := os.ReadFile(path)
	if got := strings.Count(string(b), "\n"); got != 3 {
		t.Fatalf("file has %d lines, want a, d, e:\n%s", got, b)
	}
	if recs := readRecords(t, path); len(recs) != 3 {
		t.Fatalf("records %v", recs)
	}
}

func TestRunStopsOnWriteError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, _ := OpenOutput(path)
	out.f.Close() // every write now fails, as on a full disk
	d := &echoDoer{}
	_, err := (&Runner{Doer: d, Parallel: 2}).Run(context.Background(), promptsInput(20), out)
	if err == nil || !strings.Contains(err.Error(), "writing") {
		t.Fatalf("err = %v, want the write error", err)
	}
	if len(d.calls) == 20 {
		t.Fatalf("the run went on after the write failed")
	}
}

func TestProgressBarAndSummary(t *testing.T) {
	p := Progress{Total: 200, Done: 90, Resumed: 40, Failed: 2, Tokens: 4130, Elapsed: 100 * time.Second}
	bar := p.Bar(80)
	if !strings.Contains(bar, " 90/200") || !strings.Contains(bar, "41.3 tok/s") || !strings.Contains(bar, "ETA 3m40s") || !strings.Contains(bar, "2 failed") || len(bar) > 80 {
		t.Fatalf("bar %q (%d columns)", bar, len(bar))
	}
	if s := p.Summary(); !strings.Contains(s, "90/200 requests answered (40 from an earlier run), 2 failed") {
		t.Fatalf("summary %q", s)
	}
}

func TestHTTPDoerSendsClassAndKey(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(201)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	d := &HTTPDoer{BaseURL: srv.URL + "/v1/", APIKey: "k", Class: "background"}
	status, resp, err := d.Do(context.Background(), "POST", Completions, []byte(`{"prompt":"x"}`))
	if err != nil || status != 201 || string(resp) != `{"ok":true}` {
		t.Fatalf("%d %s %v", status, resp, err)
	}
	if got.URL.Path != "/v1/completions" || got.Header.Get("Authorization") != "Bearer k" || got.Header.Get("X-Superfluid-Class") != "background" ||
		got.Header.Get("Content-Type") != "application/json" || string(body) != `{"prompt":"x"}` {
		t.Fatalf("request %s %v %s", got.URL, got.Header, body)
	}
	srv.Close()
	if _, _, err := d.Do(context.Background(), "POST", Completions, nil); err == nil {
		t.Fatal("no error from a closed server")
	}
}

// A file with lines that are not results is somebody else's: the user's
// own output is refused, not rewritten; the server's own results file
// drops the damage.
func TestOpenOutputRefusesAForeignFile(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	content := `{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":"x"}}` + "\n" + `{"prompt":"y"}` + "\n"
	os.WriteFile(input, []byte(content), 0o644)
	if _, err := OpenOutput(input); !errors.Is(err, ErrNotResults) {
		t.Fatalf("opening an input file as output: %v", err)
	}
	if b, _ := os.ReadFile(input); string(b) != content {
		t.Fatalf("the input file was changed:\n%s", b)
	}
	if _, err := os.Stat(input + ".lock"); err == nil {
		t.Fatal("a refused open left its lock file")
	}
	own := filepath.Join(dir, "own.jsonl")
	os.WriteFile(own, []byte("not json\n"+`{"id":"x","custom_id":"a","response":{"status_code":200,"request_id":"r","body":{}},"error":null}`+"\n"), 0o644)
	o, err := OpenOwnOutput(own)
	if err != nil || !o.Done("a") || o.Len() != 1 {
		t.Fatalf("own results: %v", err)
	}
	o.Close()
}

func TestOpenOutputIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	first, err := OpenOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutput(path); err == nil || !strings.Contains(err.Error(), "another run") {
		t.Fatalf("second open: %v", err)
	}
	first.Close()
	if _, err := os.Stat(path + ".lock"); err == nil {
		t.Fatal("Close left the lock file")
	}
	again, err := OpenOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}
