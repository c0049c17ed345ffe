package e2e

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"superfluid/app"
)

// Ollama's /api/pull and /api/delete through Ollama's own Go client,
// against a local fake of the Hugging Face Hub: the real server pulls
// into its models directory with package pull, lists, deletes.

// fakeHub serves hf.co/org/repo the way the Hub does for package pull:
// the model API's file list, and resolve URLs answering HEAD with
// X-Linked-Size and X-Linked-Etag (the sha256) and GET with Range.
type fakeHub struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string]hubFile
	// stallAfter, when > 0, makes the next GET send that many bytes and
	// then wait until its client goes; gone is told when it has.
	stallAfter int
	gone       chan struct{}
	ranges     []string // the Range header of each GET
}

type hubFile struct {
	data []byte
	sha  string // what the Hub announces ("" the data's own)
}

func newFakeHub(t *testing.T, files map[string]hubFile) *fakeHub {
	h := &fakeHub{files: files, gone: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/models/org/repo", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		var sib []map[string]string
		for name := range h.files {
			sib = append(sib, map[string]string{"rfilename": name})
		}
		json.NewEncoder(w).Encode(map[string]any{"siblings": sib})
	})
	mux.HandleFunc("/org/repo/resolve/main/", h.resolve)
	mux.HandleFunc("/page.gguf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>Sign in to download this model</body></html>")
	})
	h.Server = httptest.NewServer(mux)
	t.Cleanup(h.Close)
	t.Setenv("HF_ENDPOINT", h.URL)
	return h
}

func (h *fakeHub) resolve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	f, ok := h.files[strings.TrimPrefix(r.URL.Path, "/org/repo/resolve/main/")]
	stall := 0
	if r.Method == http.MethodGet {
		h.ranges = append(h.ranges, r.Header.Get("Range"))
		stall, h.stallAfter = h.stallAfter, 0
	}
	h.mu.Unlock()
	if !ok {
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	sha := cmp.Or(f.sha, sha256Hex(f.data))
	w.Header().Set("X-Linked-Size", fmt.Sprint(len(f.data)))
	w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
	w.Header().Set("ETag", `"`+sha+`"`)
	if stall > 0 {
		w.Header().Set("Content-Length", fmt.Sprint(len(f.data)))
		w.Write(f.data[:stall])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		h.gone <- struct{}{}
		return
	}
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader(string(f.data)))
}

func (h *fakeHub) gets() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ranges)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pullStack starts the server over a models directory that holds the
// served model itself (served.gguf, a copy of the tiny model).
func pullStack(t *testing.T) (*app.Stack, string, []byte) {
	t.Helper()
	data, err := os.ReadFile(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	served := filepath.Join(dir, "served.gguf")
	if err := os.WriteFile(served, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return startStack(t, app.Options{ModelPath: served, ModelsDir: dir}), dir, data
}

func tagNames(t *testing.T, c *api.Client) []string {
	t.Helper()
	list, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	return names
}

func TestOllamaPullListDelete(t *testing.T) {
	st, dir, data := pullStack(t)
	h := newFakeHub(t, map[string]hubFile{"tiny-Q8_0.gguf": {data: data}, "README.md": {data: []byte("hi")}})
	c := ollamaClient(t, st)
	before := goroutineIDs()
	ctx := context.Background()

	var seen []api.ProgressResponse
	if err := c.Pull(ctx, &api.PullRequest{Model: "hf.co/org/repo:Q8_0"}, func(p api.ProgressResponse) error {
		seen = append(seen, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sha := sha256Hex(data)
	layer := "pulling " + sha[:12]
	statuses := distinct(seen)
	if want := []string{"pulling manifest", layer, "verifying sha256 digest", "writing manifest", "success"}; !slices.Equal(statuses, want) {
		t.Fatalf("statuses %q, want %q", statuses, want)
	}
	for _, p := range seen {
		if p.Status == layer && (p.Digest != "sha256:"+sha || p.Total != int64(len(data)) || p.Completed > p.Total) {
			t.Fatalf("a download line %+v", p)
		}
	}
	if last := lastOf(seen, layer); last.Completed != int64(len(data)) {
		t.Fatalf("the last download line %+v", last)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "tiny-Q8_0.gguf")); err != nil || string(got) != string(data) {
		t.Fatalf("the pulled file: %v", err)
	}
	if names := tagNames(t, c); !slices.Equal(names, []string{"tiny:latest", "tiny-Q8_0:latest"}) {
		t.Fatalf("tags after the pull: %q", names)
	}
	list, _ := c.List(ctx)
	if m := list.Models[1]; m.Size != int64(len(data)) || m.Digest != sha || m.Details.Family != "llama" {
		t.Fatalf("the pulled model is listed as %+v", m)
	}

	// Pulled again: up to date, nothing downloaded.
	gets := len(h.gets())
	seen = nil
	if err := c.Pull(ctx, &api.PullRequest{Model: "hf.co/org/repo:Q8_0"}, func(p api.ProgressResponse) error {
		seen = append(seen, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if statuses := distinct(seen); !slices.Equal(statuses, []string{"pulling manifest", layer, "success"}) || lastOf(seen, layer).Completed != int64(len(data)) {
		t.Fatalf("an up-to-date pull reported %+v", seen)
	}
	if len(h.gets()) != gets {
		t.Fatal("an up-to-date model was downloaded again")
	}

	// Served by the name it was pulled as (loaded on demand), and
	// unloaded when it is deleted.
	if status, raw := post(t, st.URL()+"/api/generate", map[string]any{"model": "tiny-Q8_0", "prompt": "Once", "stream": false, "options": map[string]any{"num_predict": 2}}); status != 200 {
		t.Fatalf("generate with the pulled model: %d %s", status, raw)
	}
	waitPS(t, st.URL(), "tiny-Q8_0:latest", "tiny:latest")

	// Deleted by the name /api/tags lists.
	if err := c.Delete(ctx, &api.DeleteRequest{Model: "tiny-Q8_0:latest"}); err != nil {
		t.Fatal(err)
	}
	waitPS(t, st.URL(), "tiny:latest")
	if names := tagNames(t, c); !slices.Equal(names, []string{"tiny:latest"}) {
		t.Fatalf("tags after the delete: %q", names)
	}
	if left := dirFiles(t, dir); !slices.Equal(left, []string{"served.gguf"}) {
		t.Fatalf("files left after the delete: %q", left)
	}
	for _, c2 := range []struct {
		name   string
		status int
		want   string
	}{
		{"tiny-Q8_0:latest", 404, "model 'tiny-Q8_0:latest' not found"},
		{"served", 409, "started with"},
		{"../served", 400, "names a path"},
		{"/etc/passwd", 400, "names a path"},
	} {
		err := c.Delete(ctx, &api.DeleteRequest{Model: c2.name})
		var se api.StatusError
		if !errors.As(err, &se) || se.StatusCode != c2.status || !strings.Contains(se.ErrorMessage, c2.want) {
			t.Errorf("delete %q: %v, want %d saying %q", c2.name, err, c2.status, c2.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "served.gguf")); err != nil {
		t.Fatal("the served model was removed")
	}

	// A plain URL: its digest is unknown until the end, so its lines are
	// keyed by the file's name; it is deleted by the URL it came from.
	url := h.URL + "/org/repo/resolve/main/tiny-Q8_0.gguf"
	seen = nil
	if err := c.Pull(ctx, &api.PullRequest{Model: url}, func(p api.ProgressResponse) error {
		seen = append(seen, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if last := lastOf(seen, "pulling tiny-Q8_0.gguf"); last.Digest != "tiny-Q8_0.gguf" || last.Completed != int64(len(data)) || last.Total != int64(len(data)) {
		t.Fatalf("a URL's download lines: %+v", seen)
	}
	if err := c.Delete(ctx, &api.DeleteRequest{Model: url}); err != nil {
		t.Fatal(err)
	}
	if left := dirFiles(t, dir); !slices.Equal(left, []string{"served.gguf"}) {
		t.Fatalf("files left after deleting by URL: %q", left)
	}
	if leaked := leakedGoroutines(before); len(leaked) > 0 {
		t.Errorf("%d goroutines left behind:\n%s", len(leaked), leaked)
	}
}

// A file that fails verification ends the stream with an error line and
// leaves nothing in the directory; a name this server cannot fetch is a
// 400 before anything streams.
func TestOllamaPullRefusesBadFiles(t *testing.T) {
	st, dir, data := pullStack(t)
	h := newFakeHub(t, map[string]hubFile{"tiny-BAD.gguf": {data: data, sha: sha256Hex([]byte("another file"))}})
	c := ollamaClient(t, st)
	ctx := context.Background()
	for ref, want := range map[string]string{
		"hf.co/org/repo:BAD":    "sha256 mismatch",
		h.URL + "/page.gguf":    "is not a GGUF file",
		"hf.co/org/repo:Q2_K":   "no GGUF file matching",
		"hf.co/org/other:Q8_0":  "404",
		"llama3.2":              "want hf.co/ORG/REPO:FILE or an http(s) URL",
		"hf.co/org/repo/../x:Y": "the repository must be ORG/REPO",
	} {
		var statuses []string
		err := c.Pull(ctx, &api.PullRequest{Model: ref}, func(p api.ProgressResponse) error {
			statuses = append(statuses, p.Status)
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), want) || slices.Contains(statuses, "success") {
			t.Errorf("pull %s: %v after %q, want an error saying %q", ref, err, statuses, want)
		}
		if left := dirFiles(t, dir); !slices.Equal(left, []string{"served.gguf"}) {
			t.Errorf("pull %s left %q", ref, left)
		}
	}
	// A name refused up front is a plain 400, streamed or not.
	var se api.StatusError
	if err := c.Pull(ctx, &api.PullRequest{Model: "llama3.2"}, func(api.ProgressResponse) error { return nil }); !errors.As(err, &se) || se.StatusCode != 400 {
		t.Errorf("an Ollama registry name: %v", err)
	}
	// stream false: the error as the one answer.
	resp, err := http.Post(st.URL()+"/api/pull", "application/json", strings.NewReader(`{"model": "hf.co/org/repo:BAD", "stream": false}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.HasPrefix(string(body), `{"error":"pull: tiny-BAD.gguf: sha256 mismatch`) {
		t.Fatalf("stream false: %d %s", resp.StatusCode, body)
	}
}

// A client that goes away mid-download cancels it (the hub sees its
// request end); the partial file stays, and the next pull resumes it.
func TestOllamaPullCancelledByTheClientResumes(t *testing.T) {
	st, dir, data := pullStack(t)
	h := newFakeHub(t, map[string]hubFile{"tiny-Q8_0.gguf": {data: data}})
	h.stallAfter = 64 << 10
	c := ollamaClient(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	succeeded := false
	err := c.Pull(ctx, &api.PullRequest{Model: "hf.co/org/repo:Q8_0"}, func(p api.ProgressResponse) error {
		if p.Completed >= 64<<10 {
			cancel()
		}
		succeeded = succeeded || p.Status == "success"
		return nil
	})
	// Ollama's client reports a stream cut by its context as no error.
	if (err != nil && !errors.Is(err, context.Canceled)) || ctx.Err() == nil || succeeded {
		t.Fatalf("the cancelled pull: %v (context %v, success seen %v)", err, ctx.Err(), succeeded)
	}
	select {
	case <-h.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server kept downloading after its client left")
	}
	partial := filepath.Join(dir, "tiny-Q8_0.gguf.partial")
	waitFor(t, func() bool { fi, err := os.Stat(partial); return err == nil && fi.Size() == 64<<10 })

	if err := c.Pull(context.Background(), &api.PullRequest{Model: "hf.co/org/repo:Q8_0"}, func(api.ProgressResponse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := h.gets(); !slices.Equal(got, []string{"", fmt.Sprintf("bytes=%d-", 64<<10)}) {
		t.Fatalf("the hub saw GETs with ranges %q, want a resume", got)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "tiny-Q8_0.gguf")); err != nil || string(got) != string(data) {
		t.Fatalf("the resumed file: %v", err)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// distinct is the statuses in order, repeats of one collapsed.
func distinct(ps []api.ProgressResponse) []string {
	var out []string
	for _, p := range ps {
		if len(out) == 0 || out[len(out)-1] != p.Status {
			out = append(out, p.Status)
		}
	}
	return out
}

func lastOf(ps []api.ProgressResponse, status string) api.ProgressResponse {
	var last api.ProgressResponse
	for _, p := range ps {
		if p.Status == status {
			last = p
		}
	}
	return last
}

func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
