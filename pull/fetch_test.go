package pull

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPullURLThenListAndResolve(t *testing.T) {
	data := tinyGGUF(t, 1, 300<<10)
	fs := newFileServer(t, data)
	dir := t.TempDir()
	url := fs.URL + "/files/tiny-model.gguf"
	res, err := Pull(context.Background(), url, quick(dir))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tiny-model.gguf")
	if res.Name != "tiny-model" || res.Path != path || res.Source != url || res.Size != int64(len(data)) || res.SHA256 != digest(data) || res.UpToDate {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal(readFile(t, path), data) {
		t.Fatal("the pulled file differs from the served one")
	}
	if got := onlyFiles(t, dir); !slices.Equal(got, []string{"tiny-model.gguf", "tiny-model.gguf.json"}) {
		t.Fatalf("models dir holds %v", got)
	}
	var m manifest
	if err := json.Unmarshal(readFile(t, path+".json"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Source != url || m.URL != url || m.Size != int64(len(data)) || m.SHA256 != digest(data) || m.PulledAt.IsZero() {
		t.Fatalf("manifest %+v", m)
	}

	entries, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name != "tiny-model" || entries[0].Path != path || entries[0].Source != url ||
		entries[0].SHA256 != digest(data) || entries[0].Size != int64(len(data)) || entries[0].PulledAt == nil {
		t.Fatalf("entries %+v", entries)
	}
	for _, arg := range []string{"tiny-model", "tiny-model.gguf", url, path} {
		if got, err := Resolve(arg, dir); err != nil || got != path {
			t.Errorf("Resolve(%q) = %q, %v", arg, got, err)
		}
	}

	// Pulling it again asks the server (HEAD) and downloads nothing.
	before := len(fs.requests())
	res, err = Pull(context.Background(), url, quick(dir))
	if err != nil || !res.UpToDate || res.SHA256 != digest(data) {
		t.Fatalf("second pull: %+v, %v", res, err)
	}
	for _, r := range fs.requests()[before:] {
		if strings.HasPrefix(r, "GET") {
			t.Fatalf("the second pull downloaded: %v", fs.requests())
		}
	}
}

func TestPullResumesAfterDroppedConnection(t *testing.T) {
	data := tinyGGUF(t, 2, 400<<10)
	fs := newFileServer(t, data)
	fs.cutAfter = 100_000
	dir := t.TempDir()
	res, err := Pull(context.Background(), fs.URL+"/m.gguf", quick(dir))
	if err != nil {
		t.Fatal(err)
	}
	reqs := fs.requests()
	want := []string{
		`GET range= if-range= auth= -> 200`,
		`GET range=bytes=100000- if-range="v1" auth= -> 206`,
	}
	if !slices.Equal(reqs, want) {
		t.Fatalf("requests %q, want %q", reqs, want)
	}
	if !bytes.Equal(readFile(t, res.Path), data) || res.SHA256 != digest(data) {
		t.Fatal("the resumed file differs from the served one")
	}
}

func TestPullInterruptedThenResumed(t *testing.T) {
	data := tinyGGUF(t, 3, 400<<10)
	fs := newFileServer(t, data)
	fs.stallAfter = 120_000
	dir := t.TempDir()
	url := fs.URL + "/m.gguf"
	ctx, cancel := context.WithCancel(context.Background())
	opts := quick(dir)
	opts.OnProgress = func(p Progress) {
		if p.Done >= 120_000 {
			cancel() // Ctrl-C
		}
	}
	_, err := Pull(ctx, url, opts)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "again to resume") {
		t.Fatalf("interrupted pull: %v", err)
	}
	partial := filepath.Join(dir, "m.gguf.partial")
	if fi, err := os.Stat(partial); err != nil || fi.Size() != 120_000 {
		t.Fatalf("partial file: %v, %v", fi, err)
	}
	if exists(filepath.Join(dir, "m.gguf")) {
		t.Fatal("an incomplete file took the model's name")
	}
	if entries, _ := List(dir); len(entries) != 0 {
		t.Fatalf("a partial download is listed: %+v", entries)
	}

	res, err := Pull(context.Background(), url, quick(dir))
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 120_000 || !bytes.Equal(readFile(t, res.Path), data) || res.SHA256 != digest(data) {
		t.Fatalf("resumed pull: %+v", res)
	}
	if last := fs.requests()[len(fs.requests())-1]; last != `GET range=bytes=120000- if-range="v1" auth= -> 206` {
		t.Fatalf("the second pull asked %q", last)
	}
	if exists(partial) || exists(partial+".json") {
		t.Fatal("partial files left behind")
	}
}

func TestPullRestartsWhenRemoteChanged(t *testing.T) {
	v1, v2 := tinyGGUF(t, 4, 300<<10), tinyGGUF(t, 5, 300<<10)
	fs := newFileServer(t, v1)
	fs.stallAfter = 50_000
	dir := t.TempDir()
	url := fs.URL + "/m.gguf"
	ctx, cancel := context.WithCancel(context.Background())
	opts := quick(dir)
	opts.OnProgress = func(p Progress) {
		if p.Done >= 50_000 {
			cancel()
		}
	}
	if _, err := Pull(ctx, url, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pull: %v", err)
	}
	fs.set(v2, `"v2"`)
	res, err := Pull(context.Background(), url, quick(dir))
	if err != nil {
		t.Fatal(err)
	}
	if last := fs.requests()[len(fs.requests())-1]; last != `GET range=bytes=50000- if-range="v1" auth= -> 200` {
		t.Fatalf("the second pull asked %q", last)
	}
	if res.Resumed != 0 || !bytes.Equal(readFile(t, res.Path), v2) || res.SHA256 != digest(v2) {
		t.Fatalf("a changed file was spliced: %+v", res)
	}
}

func TestPullRefusesWrongChecksum(t *testing.T) {
	data := tinyGGUF(t, 6, 200<<10)
	wrong := digest([]byte("something else"))

	t.Run("announced by Hugging Face", func(t *testing.T) {
		h := newHFServer(t, "org/repo", map[string][]byte{"model-Q8_0.gguf": data})
		h.mu.Lock()
		h.linkedSHA = wrong
		h.mu.Unlock()
		dir := t.TempDir()
		_, err := Pull(context.Background(), "hf.co/org/repo:model-Q8_0.gguf", quick(dir))
		if err == nil || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), digest(data)) {
			t.Fatalf("error %v, want both digests", err)
		}
		if got := onlyFiles(t, dir); len(got) != 0 {
			t.Fatalf("left behind: %v", got)
		}
	})
	t.Run("given with --sha256", func(t *testing.T) {
		fs := newFileServer(t, data)
		dir := t.TempDir()
		opts := quick(dir)
		opts.SHA256 = "sha256:" + strings.ToUpper(wrong)
		_, err := Pull(context.Background(), fs.URL+"/m.gguf", opts)
		if err == nil || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), digest(data)) {
			t.Fatalf("error %v, want both digests", err)
		}
		if got := onlyFiles(t, dir); len(got) != 0 {
			t.Fatalf("left behind: %v", got)
		}
		opts.SHA256 = digest(data)
		if _, err := Pull(context.Background(), fs.URL+"/m.gguf", opts); err != nil {
			t.Fatalf("the right digest: %v", err)
		}
		opts.SHA256 = "abc"
		if _, err := Pull(context.Background(), fs.URL+"/m.gguf", opts); err == nil {
			t.Fatal("a malformed digest was accepted")
		}
	})
}

func TestPullRefusesNonGGUF(t *testing.T) {
	page := []byte("<!DOCTYPE html><html><body>" + strings.Repeat("<p>Sign in to continue</p>", 160_000) + "</body></html>")
	fs := newFileServer(t, page)
	dir := t.TempDir()
	opts := quick(dir)
	var most int64
	opts.OnProgress = func(p Progress) { most = max(most, p.Done) }
	_, err := Pull(context.Background(), fs.URL+"/model.gguf", opts)
	if err == nil || !strings.Contains(err.Error(), "is not a GGUF file") || !strings.Contains(err.Error(), "<!DOCTYPE") {
		t.Fatalf("error %v", err)
	}
	if most >= int64(len(page))/2 {
		t.Fatalf("refused only after %d of %d bytes", most, len(page))
	}
	if got := onlyFiles(t, dir); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}

	// The magic alone is not enough: the header must parse.
	fake := append([]byte("GGUF"), bytes.Repeat([]byte{0xff}, 5000)...)
	fs.set(fake, `"v2"`)
	_, err = Pull(context.Background(), fs.URL+"/model.gguf", quick(dir))
	if err == nil || !strings.Contains(err.Error(), "not a valid GGUF file") {
		t.Fatalf("error %v", err)
	}
	if got := onlyFiles(t, dir); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
}

func TestPullHFQuantTag(t *testing.T) {
	files := map[string][]byte{
		"model-Q4_K_M.gguf":  tinyGGUF(t, 7, 100<<10),
		"model-Q8_0.gguf":    tinyGGUF(t, 8, 100<<10),
		"sub/model-F16.gguf": tinyGGUF(t, 9, 100<<10),
	}
	h := newHFServer(t, "org/repo", files)
	t.Setenv("HF_TOKEN", "secret")
	dir := t.TempDir()
	res, err := Pull(context.Background(), "hf.co/org/repo:q4_k_m", quick(dir))
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != "model-Q4_K_M" || res.Source != "hf.co/org/repo:model-Q4_K_M.gguf" || res.SHA256 != digest(files["model-Q4_K_M.gguf"]) {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal(readFile(t, res.Path), files["model-Q4_K_M.gguf"]) {
		t.Fatal("wrong content")
	}
	for _, a := range h.auths {
		if a != "Bearer secret" {
			t.Fatalf("the Hub saw Authorization %q", a)
		}
	}
	for _, r := range h.storage.requests() {
		if !strings.Contains(r, "auth= ") {
			t.Fatalf("the token went to the storage host: %s", r)
		}
	}
	for _, arg := range []string{"hf.co/org/repo:Q4_K_M", "hf.co/org/repo:model-Q4_K_M.gguf", "huggingface.co/org/repo:q4_k_m",
		"https://huggingface.co/org/repo/resolve/main/model-Q4_K_M.gguf", "hf.co/org/repo", "model-Q4_K_M"} {
		if got, err := Resolve(arg, dir); err != nil || got != res.Path {
			t.Errorf("Resolve(%q) = %q, %v", arg, got, err)
		}
	}

	// Again: up to date, without a byte downloaded; changed upstream: downloaded again.
	gets := len(h.storage.requests())
	if again, err := Pull(context.Background(), "hf.co/org/repo:Q4_K_M", quick(dir)); err != nil || !again.UpToDate || len(h.storage.requests()) != gets {
		t.Fatalf("pulling again: %+v, %v, storage saw %q", again, err, h.storage.requests()[gets:])
	}
	v2 := tinyGGUF(t, 17, 100<<10)
	h.setFile("model-Q4_K_M.gguf", v2)
	if again, err := Pull(context.Background(), "hf.co/org/repo:Q4_K_M", quick(dir)); err != nil || again.UpToDate || again.SHA256 != digest(v2) || !bytes.Equal(readFile(t, res.Path), v2) {
		t.Fatalf("pulling a changed file: %+v, %v", again, err)
	}

	res, err = Pull(context.Background(), "huggingface.co/org/repo:sub/model-F16.gguf", quick(dir))
	if err != nil || res.Name != "model-F16" || !bytes.Equal(readFile(t, res.Path), files["sub/model-F16.gguf"]) {
		t.Fatalf("subfolder file: %+v, %v", res, err)
	}
	if _, err := Resolve("hf.co/org/repo", dir); err == nil || !strings.Contains(err.Error(), "matches 2") {
		t.Fatalf("an ambiguous reference resolved: %v", err)
	}

	for ref, want := range map[string]string{
		"hf.co/org/repo:Q5_K_M":      "no GGUF file matching",
		"hf.co/org/repo":             "has 3 GGUF files",
		"hf.co/org/repo:model":       "3 GGUF files matching",
		"hf.co/org/repo:nope.gguf":   "404",
		"hf.co/org/other:model.gguf": "404",
	} {
		if _, err := Pull(context.Background(), ref, quick(t.TempDir())); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Pull(%q): %v, want %q", ref, err, want)
		}
	}
}

func TestPullRefusesNameOfAnotherSource(t *testing.T) {
	a, b := tinyGGUF(t, 10, 50<<10), tinyGGUF(t, 11, 50<<10)
	fa, fb := newFileServer(t, a), newFileServer(t, b)
	dir := t.TempDir()
	if _, err := Pull(context.Background(), fa.URL+"/model.gguf", quick(dir)); err != nil {
		t.Fatal(err)
	}
	_, err := Pull(context.Background(), fb.URL+"/model.gguf", quick(dir))
	if err == nil || !strings.Contains(err.Error(), "--name") || !strings.Contains(err.Error(), fa.URL) {
		t.Fatalf("error %v", err)
	}
	opts := quick(dir)
	opts.Name = "model-b"
	res, err := Pull(context.Background(), fb.URL+"/model.gguf", opts)
	if err != nil || res.Name != "model-b" || !bytes.Equal(readFile(t, res.Path), b) {
		t.Fatalf("--name: %+v, %v", res, err)
	}
	if !bytes.Equal(readFile(t, filepath.Join(dir, "model.gguf")), a) {
		t.Fatal("the first model was overwritten")
	}

	// A file copied in by hand is listed, and not overwritten either.
	hand := tinyGGUF(t, 12, 10<<10)
	os.WriteFile(filepath.Join(dir, "hand.gguf"), hand, 0o644)
	if _, err := Pull(context.Background(), fa.URL+"/hand.gguf", quick(dir)); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("error %v", err)
	}
	entries, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name+"="+e.Source)
	}
	if want := []string{"hand=", "model=" + fa.URL + "/model.gguf", "model-b=" + fb.URL + "/model.gguf"}; !slices.Equal(names, want) {
		t.Fatalf("listed %v, want %v", names, want)
	}
}

func TestPullRetriesServerErrors(t *testing.T) {
	data := tinyGGUF(t, 13, 50<<10)
	fs := newFileServer(t, data)
	var fails atomic.Int32
	fails.Store(2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fails.Add(-1) >= 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fs.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	res, err := Pull(context.Background(), srv.URL+"/m.gguf", quick(t.TempDir()))
	if err != nil || !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatalf("%+v, %v", res, err)
	}

	fails.Store(100)
	_, err = Pull(context.Background(), srv.URL+"/n.gguf", quick(t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "gave up after 5 attempts") {
		t.Fatalf("error %v", err)
	}
}

func TestPullRetriesStalledTransfer(t *testing.T) {
	data := tinyGGUF(t, 14, 200<<10)
	fs := newFileServer(t, data)
	fs.stallAfter = 70_000
	opts := quick(t.TempDir())
	opts.StallTimeout = 200 * time.Millisecond
	res, err := Pull(context.Background(), fs.URL+"/m.gguf", opts)
	if err != nil || !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatalf("%+v, %v", res, err)
	}
	if !slices.Contains(fs.requests(), `GET range=bytes=70000- if-range="v1" auth= -> 206`) {
		t.Fatalf("requests %q", fs.requests())
	}
}

// A crash after the last byte but before the rename leaves a complete
// partial file: the server answers 416 to its range, and the file is
// verified and named without a byte downloaded again.
func TestPullFinishesCompletePartial(t *testing.T) {
	data := tinyGGUF(t, 15, 60<<10)
	fs := newFileServer(t, data)
	dir := t.TempDir()
	url := fs.URL + "/m.gguf"
	partial := filepath.Join(dir, "m.gguf.partial")
	os.WriteFile(partial, data, 0o644)
	st, _ := json.Marshal(partialState{Source: url, URL: url, Validator: `"v1"`, Size: -1})
	os.WriteFile(partial+".json", st, 0o644)
	res, err := Pull(context.Background(), url, quick(dir))
	if err != nil || res.Resumed != int64(len(data)) || res.SHA256 != digest(data) || !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatalf("%+v, %v", res, err)
	}
	if reqs, want := fs.requests(), fmt.Sprintf(`GET range=bytes=%d- if-range="v1" auth= -> 416`, len(data)); !slices.Equal(reqs, []string{want}) {
		t.Fatalf("requests %q, want only %q", reqs, want)
	}

	// A partial file of unknown origin is not trusted.
	os.Remove(res.Path)
	os.Remove(res.Path + ".json")
	os.WriteFile(partial, []byte("GGUFjunk"), 0o644)
	if res, err := Pull(context.Background(), url, quick(dir)); err != nil || res.Resumed != 0 || !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatalf("%+v, %v", res, err)
	}
}
