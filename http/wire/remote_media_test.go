package wire

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"superfluid/media"
	"superfluid/task"
)

// visionStub is a projector FetchMediaWith only asks to exist.
type visionStub struct{ task.Projector }

// Remote images: refused naming the field and the flag when the server
// fetches none, fetched into their slots when it does, a failing fetch a
// 400 naming the field with the reason, and nothing fetched for a model
// that takes no images (its refusal is the request core's).
func TestFetchMediaWith(t *testing.T) {
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/a.png" {
			http.NotFound(w, r)
			return
		}
		w.Write(img.Bytes())
	}))
	defer srv.Close()
	vision := &task.Model{Name: "v", Media: visionStub{}}
	remote := func(path string) []media.Remote {
		return []media.Remote{{Index: 1, URL: srv.URL + path, Field: "messages", At: "messages[0].content[1].image_url"}}
	}
	f := media.NewFetcher(media.FetcherOptions{MaxBytes: MaxMediaBytes})

	images := [][]byte{[]byte("inline"), nil}
	if err := FetchMediaWith(context.Background(), f, &task.Model{Name: "text"}, images, remote("/a.png")); err != nil || images[1] != nil {
		t.Errorf("a model without a projector: %v, %d bytes fetched", err, len(images[1]))
	}
	err := FetchMediaWith(context.Background(), nil, vision, images, remote("/a.png"))
	if e := AsError(err); e == nil || e.Status != 400 || e.Param != "messages" || e.Code != "unsupported_parameter" ||
		!strings.Contains(e.Msg, "--allow-remote-media") || !strings.Contains(e.Msg, "messages[0].content[1].image_url") {
		t.Errorf("no fetcher: %v", err)
	}
	if err := FetchMediaWith(context.Background(), f, vision, images, remote("/a.png")); err != nil || !bytes.Equal(images[1], img.Bytes()) {
		t.Errorf("fetched: %v, %d bytes", err, len(images[1]))
	}
	err = FetchMediaWith(context.Background(), f, vision, [][]byte{nil, nil}, remote("/gone.png"))
	if e := AsError(err); e == nil || e.Status != 400 || e.Param != "messages" || !strings.Contains(e.Msg, "404 Not Found") {
		t.Errorf("a 404: %v", err)
	}
}
