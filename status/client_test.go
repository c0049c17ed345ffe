package status

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	stream := "event: status\ndata: {\"version\":\"a\",\"lanes\":[{\"model\":\"m\",\"index\":0,\"phase\":\"decode\"}]}\n\n" +
		": a comment\n\nevent: other\ndata: {\"version\":\"skip\"}\n\n" +
		"data: {\"version\":\"b\"}\n\n"
	var got []string
	err := ReadEvents(strings.NewReader(stream), func(s *Status) { got = append(got, s.Version) })
	if !errors.Is(err, ErrStreamEnded) || fmt.Sprint(got) != "[a b]" {
		t.Fatalf("%v %v", got, err)
	}
	if err := ReadEvents(strings.NewReader("data: {nope\n\n"), func(*Status) {}); err == nil || errors.Is(err, ErrStreamEnded) {
		t.Fatalf("a malformed event: %v", err)
	}
}

func TestClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"message":"wrong key","type":"authentication_error"}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/status":
			fmt.Fprint(w, `{"version":"v","lanes":[{"model":"m","index":0,"phase":"idle"},{"model":"m","index":1,"phase":"prefill"}]}`)
		case "/v1/status/events":
			fmt.Fprint(w, "event: status\ndata: {\"version\":\"e1\"}\n\nevent: status\ndata: {\"version\":\"e2\"}\n\n")
		}
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL + "/", APIKey: "k"}
	st, err := c.Fetch(context.Background())
	if err != nil || st.Version != "v" {
		t.Fatal(st, err)
	}
	if busy, total := st.BusyLanes("m"); busy != 1 || total != 2 {
		t.Fatalf("busy %d/%d", busy, total)
	}
	var got []string
	if err := c.Follow(context.Background(), func(s *Status) { got = append(got, s.Version) }); !errors.Is(err, ErrStreamEnded) || fmt.Sprint(got) != "[e1 e2]" {
		t.Fatalf("%v %v", got, err)
	}
	c.APIKey = "bad"
	var he *HTTPError
	if _, err := c.Fetch(context.Background()); !errors.As(err, &he) || he.Status != 401 || he.Message != "wrong key" {
		t.Fatalf("%v", err)
	}
}
