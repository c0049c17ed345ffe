package pull

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A pull past Options.MaxBytes fails, its partial file removed: refused
// before a byte is written when the size is announced, cut at the bound
// when it is not (a server that streams without a length, for ever).
func TestPullMaxBytes(t *testing.T) {
	data := tinyGGUF(t, 21, 200<<10)
	fs := newFileServer(t, data)
	dir := t.TempDir()
	opts := quick(dir)
	opts.MaxBytes = 100 << 10
	var most int64
	opts.OnProgress = func(p Progress) { most = max(most, p.Done) }
	_, err := Pull(context.Background(), fs.URL+"/big.gguf", opts)
	if err == nil || !strings.Contains(err.Error(), "--max-pull-bytes") {
		t.Fatalf("an announced size over the bound: %v", err)
	}
	if most != 0 {
		t.Errorf("%d bytes written before an announced size was refused", most)
	}
	if got := onlyFiles(t, dir); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}

	// No length: chunked, and more than the bound.
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			return
		}
		w.WriteHeader(http.StatusOK)
		for off := 0; off < len(data); off += 4096 {
			if _, err := w.Write(data[off:min(off+4096, len(data))]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer endless.Close()
	most = 0
	_, err = Pull(context.Background(), endless.URL+"/stream.gguf", opts)
	if err == nil || !strings.Contains(err.Error(), "--max-pull-bytes") {
		t.Fatalf("an unknown size growing past the bound: %v", err)
	}
	if most > opts.MaxBytes {
		t.Errorf("%d bytes written past a bound of %d", most, opts.MaxBytes)
	}
	if got := onlyFiles(t, dir); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}

	opts.MaxBytes = 1 << 20
	if _, err := Pull(context.Background(), fs.URL+"/big.gguf", opts); err != nil {
		t.Fatalf("under the bound: %v", err)
	}
}
