package pull

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"superfluid/gguf"
)

// tinyGGUF is a valid GGUF file of about size bytes: some metadata and
// one F32 tensor of seeded random bytes.
func tinyGGUF(t testing.TB, seed uint64, size int) []byte {
	t.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("general.name", fmt.Sprintf("pull-test-%d", seed))
	n := max(size/4, 8)
	data := make([]byte, n*4)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	w.AddTensor(gguf.Tensor{Name: "weights", Shape: []uint64{uint64(n)}, Type: gguf.F32, Data: data})
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fileServer serves one file with Range and If-Range (http.ServeContent)
// and can misbehave on demand.
type fileServer struct {
	*httptest.Server

	mu   sync.Mutex
	data []byte
	etag string
	// cutAfter, when > 0, makes the next body end abruptly (the
	// connection is closed) after that many bytes.
	cutAfter int64
	// stallAfter, when > 0, makes the next body stop after that many
	// bytes and hang until the client goes away.
	stallAfter int64
	// extra headers on every answer (X-Linked-Etag …).
	extra http.Header
	// what the server saw: one line per request, "METHOD range=… if-range=… -> status".
	log []string
}

func newFileServer(t *testing.T, data []byte) *fileServer {
	fs := &fileServer{data: data, etag: `"v1"`}
	fs.Server = httptest.NewServer(http.HandlerFunc(fs.serve))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *fileServer) set(data []byte, etag string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.data, fs.etag = data, etag
}

func (fs *fileServer) requests() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]string(nil), fs.log...)
}

func (fs *fileServer) serve(w http.ResponseWriter, r *http.Request) {
	fs.mu.Lock()
	data, etag := fs.data, fs.etag
	cut, stall := fs.cutAfter, fs.stallAfter
	if r.Method == http.MethodGet {
		fs.cutAfter, fs.stallAfter = 0, 0
	}
	for k, v := range fs.extra {
		w.Header()[k] = v
	}
	// The log is in arrival order: a stalled answer ends only when its
	// client gives up, which may be after the client's next request.
	entry := len(fs.log)
	fs.log = append(fs.log, fmt.Sprintf("%s (unanswered)", r.Method))
	fs.mu.Unlock()
	w.Header().Set("ETag", etag)
	rec := &recorder{ResponseWriter: w, cut: cut, stall: stall, ctx: r}
	defer func() {
		fs.mu.Lock()
		fs.log[entry] = fmt.Sprintf("%s range=%s if-range=%s auth=%s -> %d", r.Method, r.Header.Get("Range"), r.Header.Get("If-Range"), r.Header.Get("Authorization"), rec.status)
		fs.mu.Unlock()
	}()
	http.ServeContent(rec, r, "model.gguf", time.Time{}, bytes.NewReader(data))
}

// recorder notes the status and cuts or stalls the body on demand.
type recorder struct {
	http.ResponseWriter
	status      int
	cut, stall  int64
	written     int64
	ctx         *http.Request
	interrupted bool
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	limit := r.cut
	if r.stall > 0 {
		limit = r.stall
	}
	if limit > 0 && r.written+int64(len(p)) > limit {
		n, _ := r.ResponseWriter.Write(p[:limit-r.written])
		r.written += int64(n)
		r.ResponseWriter.(http.Flusher).Flush()
		if r.cut > 0 {
			panic(http.ErrAbortHandler) // closes the connection mid-body
		}
		<-r.ctx.Context().Done() // the client gave up
		return n, io.ErrClosedPipe
	}
	n, err := r.ResponseWriter.Write(p)
	r.written += int64(n)
	return n, err
}

// hfServer is a fake Hugging Face Hub: the model API and resolve URLs,
// which redirect to a separate storage server (another host) as the Hub
// does, answering HEAD with X-Linked-Size and X-Linked-Etag.
type hfServer struct {
	*httptest.Server
	storage *fileServer
	files   map[string][]byte // path in the repo → content
	// linkedSHA overrides the announced digest when set.
	linkedSHA string

	mu    sync.Mutex // guards files, linkedSHA and auths
	auths []string   // Authorization headers the Hub saw
}

func newHFServer(t *testing.T, repo string, files map[string][]byte) *hfServer {
	h := &hfServer{files: files}
	h.storage = newFileServer(t, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/models/"+repo, func(w http.ResponseWriter, r *http.Request) {
		h.note(r)
		var info struct {
			Siblings []map[string]string `json:"siblings"`
		}
		info.Siblings = append(info.Siblings, map[string]string{"rfilename": "README.md"})
		h.mu.Lock()
		defer h.mu.Unlock()
		for name := range h.files {
			info.Siblings = append(info.Siblings, map[string]string{"rfilename": name})
		}
		json.NewEncoder(w).Encode(info)
	})
	mux.HandleFunc("/"+repo+"/resolve/main/", func(w http.ResponseWriter, r *http.Request) {
		h.note(r)
		name := strings.TrimPrefix(r.URL.Path, "/"+repo+"/resolve/main/")
		h.mu.Lock()
		data, ok := h.files[name]
		linked := h.linkedSHA
		h.mu.Unlock()
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "Entry not found", http.StatusNotFound)
			return
		}
		sha := digest(data)
		if linked != "" {
			sha = linked
		}
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
		w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
		h.storage.set(data, `"`+sha+`"`)
		http.Redirect(w, r, h.storage.URL+"/storage/"+name, http.StatusFound)
	})
	h.Server = httptest.NewServer(mux)
	t.Cleanup(h.Close)
	t.Setenv("HF_ENDPOINT", h.URL)
	return h
}

// setFile replaces (or adds) a file of the repository.
func (h *hfServer) setFile(name string, data []byte) {
	h.mu.Lock()
	h.files[name] = data
	h.mu.Unlock()
}

func (h *hfServer) note(r *http.Request) {
	h.mu.Lock()
	h.auths = append(h.auths, r.Header.Get("Authorization"))
	h.mu.Unlock()
}

// quick are Options for tests: no real waiting between retries.
func quick(dir string) Options {
	return Options{Dir: dir, RetryWait: time.Millisecond}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// onlyFiles lists dir's file names.
func onlyFiles(t *testing.T, dir string) []string {
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

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
