package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// imageServer serves the remote-media cases: each path one way a page can
// answer.
func imageServer(t *testing.T, img []byte) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain") // not trusted either way
		w.Write(img)
	})
	mux.HandleFunc("/missing.png", http.NotFound)
	mux.HandleFunc("/slow.png", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/huge-declared.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(10<<30))
		w.Write(img) // the connection ends short; the length alone refuses it
	})
	mux.HandleFunc("/huge-chunked.png", func(w http.ResponseWriter, r *http.Request) {
		w.Write(img)
		chunk := bytes.Repeat([]byte{0}, 64<<10)
		for range 1 << 14 { // 1 GiB unless the reader stops
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png") // a lie
		w.Write([]byte("<!doctype html><html><body>hello</body></html>"))
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok.png", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func testPNG(t *testing.T) []byte {
	return encode(t, func(b *bytes.Buffer) error { return png.Encode(b, gradient(16, 12)) })
}

func TestFetch(t *testing.T) {
	img := testPNG(t)
	srv := imageServer(t, img)
	f := NewFetcher(FetcherOptions{MaxBytes: 1 << 20, Timeout: 300 * time.Millisecond})
	for _, tc := range []struct {
		url, want string // want: "" is the image
	}{
		{srv.URL + "/ok.png", ""},
		{srv.URL + "/hop", ""},
		{srv.URL + "/missing.png", "404 Not Found"},
		{srv.URL + "/slow.png", "no answer within 300ms"},
		{srv.URL + "/huge-declared.png", "10737418240 bytes: an image may be at most 1048576"},
		{srv.URL + "/huge-chunked.png", "more than 1048576 bytes"},
		{srv.URL + "/page.html", "not a PNG, JPEG, GIF or BMP image"},
		{srv.URL + "/loop", "more than 3 redirects"},
		{srv.URL + "/to-file", "file: URL"},
		{"ftp://example.com/a.png", "a ftp: URL is not fetched (http and https only)"},
		{"file:///etc/passwd", "a file: URL is not fetched"},
		{"http://user:pw@" + strings.TrimPrefix(srv.URL, "http://") + "/ok.png", "credentials"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://0.0.0.0:1/x.png", "unspecified"},
		{"http:///x.png", "without a host"},
	} {
		images := make([][]byte, 2)
		images[0] = []byte("inline")
		err := f.FetchAll(context.Background(), images, []Remote{{Index: 1, URL: tc.url, Field: "messages", At: "messages[0].content[1]"}})
		if tc.want == "" {
			if err != nil || !bytes.Equal(images[1], img) || string(images[0]) != "inline" {
				t.Errorf("%s: %v, %d bytes", tc.url, err, len(images[1]))
			}
			continue
		}
		var fe *FetchError
		if !errors.As(err, &fe) || !strings.Contains(fe.Reason, tc.want) || fe.Remote.Field != "messages" {
			t.Errorf("%s: %v, want a FetchError saying %q", tc.url, err, tc.want)
		}
		if images[1] != nil {
			t.Errorf("%s: an image was kept", tc.url)
		}
	}
}

// A request's fetches run FetchParallel at a time, and their bytes
// together are bounded.
func TestFetchAllBounds(t *testing.T) {
	img := testPNG(t)
	var (
		inFlight, most int
		mu             = make(chan struct{}, 1)
	)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu <- struct{}{}
		inFlight++
		most = max(most, inFlight)
		full := inFlight == FetchParallel
		<-mu
		if full {
			close(release)
		}
		<-release
		mu <- struct{}{}
		inFlight--
		<-mu
		w.Write(img)
	}))
	defer srv.Close()
	f := NewFetcher(FetcherOptions{MaxBytes: 1 << 20})
	n := FetchParallel * 3
	images := make([][]byte, n)
	var remote []Remote
	for i := range n {
		remote = append(remote, Remote{Index: i, URL: fmt.Sprintf("%s/%d.png", srv.URL, i)})
	}
	if err := f.FetchAll(context.Background(), images, remote); err != nil {
		t.Fatal(err)
	}
	if most != FetchParallel {
		t.Errorf("at most %d fetches at once, want %d", most, FetchParallel)
	}
	for i, b := range images {
		if !bytes.Equal(b, img) {
			t.Errorf("image %d not fetched", i)
		}
	}

	small := NewFetcher(FetcherOptions{MaxBytes: 1 << 20, MaxTotal: len(img) * 2})
	images = make([][]byte, 3)
	err := small.FetchAll(context.Background(), images, remote[:3])
	var fe *FetchError
	if !errors.As(err, &fe) || !strings.Contains(fe.Reason, "together") {
		t.Errorf("three images over a two-image budget: %v", err)
	}
}

// A request that ends (its client hung up) ends its fetches.
func TestFetchCancelled(t *testing.T) {
	reached := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(reached)
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-reached; cancel() }()
	f := NewFetcher(FetcherOptions{Timeout: time.Hour})
	err := f.FetchAll(ctx, make([][]byte, 1), []Remote{{URL: srv.URL + "/a.png"}})
	var fe *FetchError
	if !errors.As(err, &fe) || !strings.Contains(fe.Reason, "request ended") {
		t.Errorf("cancelled: %v", err)
	}
}

// CheckURL never panics, and what it lets through is an http(s) URL with
// a host and no credentials.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://example.com/a.png", "http://127.0.0.1:8080/x", "HTTP://H/", "ftp://x/y", "file:///etc/passwd",
		"http://user:pw@h/", "http:///x", "//h/x", "data:image/png;base64,AA", "http://[::1]:80/", "http://%zz/", "javascript:alert(1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckURL(s) != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			t.Fatalf("%q accepted: %+v, %v", s, u, err)
		}
	})
}
