package http

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStore is a ModelStore run by the test: pull plays a script of
// reports, delete answers from a map.
type fakeStore struct {
	pull func(ctx context.Context, name string, progress func(PullProgress)) error

	mu      sync.Mutex
	pulled  []string
	deleted []string
	models  map[string]error // name → what Delete answers (nil: it deletes)
	list    []StoredModel
}

func (f *fakeStore) Pull(ctx context.Context, name string, progress func(PullProgress)) error {
	f.mu.Lock()
	f.pulled = append(f.pulled, name)
	f.mu.Unlock()
	return f.pull(ctx, name, progress)
}

func (f *fakeStore) Delete(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, ok := f.models[name]
	if !ok {
		return fmt.Errorf("no %s here: %w", name, ErrModelNotFound)
	}
	if err == nil {
		f.deleted = append(f.deleted, name)
		delete(f.models, name)
	}
	return err
}

func (f *fakeStore) List(context.Context) ([]StoredModel, error) { return f.list, nil }

const fakeSHA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// downloadScript reports a whole pull of a 300-byte file.
func downloadScript(_ context.Context, _ string, progress func(PullProgress)) error {
	progress(PullProgress{Phase: PullResolving})
	for done := int64(0); done <= 300; done += 100 {
		progress(PullProgress{Phase: PullDownloading, File: "m.gguf", SHA256: fakeSHA, Total: 300, Completed: done})
	}
	progress(PullProgress{Phase: PullVerifying})
	progress(PullProgress{Phase: PullWriting})
	return nil
}

func startStoreToy(t *testing.T, store ModelStore) *toyStack {
	ts := startToy(t, toyOptions{})
	if store != nil {
		ts.srv.SetModelStore(store)
	}
	return ts
}

// pullLines posts body to /api/pull and returns the status and the
// response's JSON lines.
func pullLines(t *testing.T, ts *toyStack, body string) (int, []map[string]any) {
	t.Helper()
	status, text := ts.post(t, "/api/pull", body)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v (body %q)", l, err, text)
		}
		lines = append(lines, m)
	}
	return status, lines
}

func TestOllamaPullStreamsProgressAsOllama(t *testing.T) {
	store := &fakeStore{pull: downloadScript}
	ts := startStoreToy(t, store)
	status, lines := pullLines(t, ts, `{"model": "hf.co/org/repo:Q8_0", "insecure": true, "username": "", "password": ""}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, lines)
	}
	// Byte counts of one file may collapse into fewer lines; the phases
	// may not, nor their order.
	var statuses []string
	for _, l := range lines {
		if s := l["status"].(string); len(statuses) == 0 || statuses[len(statuses)-1] != s {
			statuses = append(statuses, s)
		}
	}
	want := []string{"pulling manifest", "pulling 0123456789ab", "verifying sha256 digest", "writing manifest", "success"}
	if strings.Join(statuses, "|") != strings.Join(want, "|") {
		t.Fatalf("statuses %q, want %q", statuses, want)
	}
	var last map[string]any
	for _, l := range lines {
		if l["status"] == "pulling 0123456789ab" {
			last = l
		}
	}
	if last["digest"] != "sha256:"+fakeSHA || last["total"] != 300.0 || last["completed"] != 300.0 {
		t.Fatalf("the last download line %v", last)
	}
	if lines[0]["digest"] != nil || lines[0]["total"] != nil {
		t.Fatalf("pulling manifest carries nothing else: %v", lines[0])
	}
	if store.pulled[0] != "hf.co/org/repo:Q8_0" {
		t.Fatalf("the store was asked for %q", store.pulled)
	}
}

func TestOllamaPullWithoutStreamAnswersOnce(t *testing.T) {
	ts := startStoreToy(t, &fakeStore{pull: downloadScript})
	status, body := ts.post(t, "/api/pull", `{"name": "https://example.com/m.gguf", "stream": false}`)
	if status != 200 || strings.TrimSpace(body) != `{"status":"success"}` {
		t.Fatalf("%d %q", status, body)
	}

	failing := &fakeStore{pull: func(_ context.Context, _ string, progress func(PullProgress)) error {
		progress(PullProgress{Phase: PullResolving})
		return errors.New("pull: m.gguf: sha256 mismatch")
	}}
	ts = startStoreToy(t, failing)
	status, body = ts.post(t, "/api/pull", `{"model": "https://example.com/m.gguf", "stream": false}`)
	if status != 500 || body != `{"error":"pull: m.gguf: sha256 mismatch"}` {
		t.Fatalf("%d %q", status, body)
	}
}

func TestOllamaPullErrorMidStreamIsAnErrorLine(t *testing.T) {
	ts := startStoreToy(t, &fakeStore{pull: func(_ context.Context, _ string, progress func(PullProgress)) error {
		progress(PullProgress{Phase: PullResolving})
		progress(PullProgress{Phase: PullDownloading, File: "m.gguf", Total: 300, Completed: 4})
		return errors.New("pull: https://example.com/m.gguf is not a GGUF file")
	}})
	status, lines := pullLines(t, ts, `{"model": "https://example.com/m.gguf"}`)
	if status != 200 || len(lines) != 3 {
		t.Fatalf("%d %v", status, lines)
	}
	if lines[1]["status"] != "pulling m.gguf" || lines[1]["digest"] != "m.gguf" || lines[1]["completed"] != 4.0 {
		t.Fatalf("a file of unknown digest: %v", lines[1])
	}
	if lines[2]["error"] != "pull: https://example.com/m.gguf is not a GGUF file" || len(lines[2]) != 1 {
		t.Fatalf("the last line %v", lines[2])
	}
}

func TestOllamaPullRefusals(t *testing.T) {
	badName := &fakeStore{pull: func(context.Context, string, func(PullProgress)) error {
		return fmt.Errorf("%w: reference \"llama3\": unknown form", ErrBadModelName)
	}}
	ts := startStoreToy(t, badName)
	for body, want := range map[string]string{
		`{"model": "llama3"}`:                         `reference \"llama3\": unknown form`,
		`{"model": ""}`:                               "model is required",
		`{"model": "hf.co/a/b", "username": "me"}`:    "username is not supported",
		`{"model": "hf.co/a/b", "password": "x"}`:     "password is not supported",
		`{"model": "hf.co/a/b", "stream": "yes"}`:     "stream",
		`{"model": "hf.co/a/b", "insecure": "maybe"}`: "insecure",
		`{"model": 5}`:                                "model",
		`[]`:                                          "",
	} {
		status, body := ts.post(t, "/api/pull", body)
		if status != 400 || !strings.HasPrefix(body, `{"error":"`) || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, status, body, want)
		}
	}
	if len(badName.pulled) != 1 {
		t.Fatalf("the store saw %q; only a well-formed request reaches it", badName.pulled)
	}

	ts = startStoreToy(t, nil)
	for _, c := range []struct{ path, method string }{{"/api/pull", "POST"}, {"/api/delete", "DELETE"}} {
		status, body := ts.send(t, c.method, c.path, `{"model": "hf.co/a/b"}`)
		if status != 501 || !strings.Contains(body, "no models directory") {
			t.Errorf("%s without a store: %d %s", c.path, status, body)
		}
	}
}

// A client that leaves mid-pull cancels it: the store's context ends, and
// the stream's goroutines with it.
func TestOllamaPullClientLeavingCancelsThePull(t *testing.T) {
	ended := make(chan error, 1)
	ts := startStoreToy(t, &fakeStore{pull: func(ctx context.Context, _ string, progress func(PullProgress)) error {
		progress(PullProgress{Phase: PullResolving})
		<-ctx.Done()
		ended <- ctx.Err()
		return ctx.Err()
	}})
	for _, stream := range []string{"true", "false"} {
		reqCtx, cancel := context.WithCancel(context.Background())
		req, _ := nethttp.NewRequestWithContext(reqCtx, "POST", ts.url+"/api/pull", strings.NewReader(`{"model": "hf.co/a/b", "stream": `+stream+`}`))
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := nethttp.DefaultClient.Do(req)
			if err != nil {
				return // stream false: the answer never comes
			}
			defer resp.Body.Close()
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			if line != `{"status":"pulling manifest"}`+"\n" {
				t.Errorf("first line %q", line)
			}
			cancel()
			io.Copy(io.Discard, resp.Body)
		}()
		if stream == "false" {
			time.Sleep(50 * time.Millisecond) // the handler waits on the pull
			cancel()
		}
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("stream %s: the pull ended with %v", stream, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %s: the pull was not cancelled when the client left", stream)
		}
		<-done
	}
}

// Shutdown stops a running pull instead of waiting out the drain for it.
func TestOllamaPullStopsAtShutdown(t *testing.T) {
	ts := startStoreToy(t, &fakeStore{pull: func(ctx context.Context, _ string, progress func(PullProgress)) error {
		progress(PullProgress{Phase: PullResolving})
		<-ctx.Done()
		return fmt.Errorf("pull: interrupted: %w", ctx.Err())
	}})
	resp, err := nethttp.Post(ts.url+"/api/pull", "application/json", strings.NewReader(`{"model": "hf.co/a/b"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, _ := r.ReadString('\n'); !strings.Contains(line, "pulling manifest") {
		t.Fatalf("first line %q", line)
	}
	start := time.Now()
	shut := make(chan error, 1)
	go func() { shut <- ts.srv.Shutdown(context.Background()) }()
	line, _ := r.ReadString('\n')
	if line != `{"error":"pull: interrupted: context canceled"}`+"\n" {
		t.Fatalf("after shutdown began: %q", line)
	}
	if err := <-shut; err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("shutdown: %v after %s", err, time.Since(start))
	}
}

func TestOllamaDelete(t *testing.T) {
	store := &fakeStore{models: map[string]error{
		"gone":    nil,
		"served":  fmt.Errorf("%w: served is the model this server was started with", ErrModelInUse),
		"../x":    fmt.Errorf("%w: \"../x\" names a path", ErrBadModelName),
		"broken":  errors.New("pull: removing broken: permission denied"),
		"tagged":  nil,
		"hf.co/a": nil,
	}}
	ts := startStoreToy(t, store)
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"model": "gone"}`, 200, ""},
		{`{"name": "tagged:latest"}`, 200, ""},
		{`{"model": "gone"}`, 404, `{"error":"model 'gone' not found"}`},
		{`{"model": "served:latest"}`, 409, "started with"},
		{`{"model": "../x"}`, 400, "names a path"},
		{`{"model": "broken"}`, 500, "permission denied"},
		{`{"model": ""}`, 400, "model is required"},
		{`{"model": "x", "model": 3}`, 400, "model"},
	} {
		status, body := ts.send(t, "DELETE", "/api/delete", c.body)
		if status != c.status || (c.want == "" && body != "") || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want %d %q", c.body, status, body, c.status, c.want)
		}
	}
	if strings.Join(store.deleted, ",") != "gone,tagged" {
		t.Fatalf("deleted %q", store.deleted)
	}
}

func TestOllamaTagsListsTheDirectory(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	store := &fakeStore{list: []StoredModel{
		{Name: "toy", Path: "/models/toy.gguf", Size: 5}, // the served model: listed once
		{Name: "other", Path: "/models/other.gguf", Size: 1234, Modified: now, SHA256: fakeSHA},
	}}
	ts := startStoreToy(t, store)
	resp, err := nethttp.Get(ts.url + "/api/tags")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tags struct {
		Models []struct {
			Name       string    `json:"name"`
			Size       int64     `json:"size"`
			Digest     string    `json:"digest"`
			ModifiedAt time.Time `json:"modified_at"`
			Details    struct {
				Format string `json:"format"`
			} `json:"details"`
		} `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tags); err != nil {
		t.Fatal(err)
	}
	if len(tags.Models) != 2 || tags.Models[0].Name != "toy:latest" || tags.Models[1].Name != "other:latest" ||
		tags.Models[1].Size != 1234 || tags.Models[1].Digest != fakeSHA || !tags.Models[1].ModifiedAt.Equal(now) ||
		tags.Models[1].Details.Format != "gguf" {
		t.Fatalf("tags %+v", tags.Models)
	}
}

// send makes a request with any method and returns the status and body.
func (ts *toyStack) send(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := nethttp.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
