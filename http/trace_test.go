package http

import (
	"context"
	nethttp "net/http"
	"os"
	"strings"
	"testing"
	"time"

	"superfluid/tracing"
	"superfluid/tracing/tracingtest"
)

// A traced server names each request's span by its route's pattern (an
// id in the path does not make a span name of its own), records the
// status, takes a well-formed traceparent as the parent and ignores a
// malformed one.
func TestRequestSpansNameTheRouteAndStatus(t *testing.T) {
	col := tracingtest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	tr, err := tracing.FromEnv(context.Background(), os.Getenv, "test")
	if err != nil || tr == nil {
		t.Fatalf("tracing: %v %v", tr, err)
	}
	defer tr.Shutdown(context.Background())
	s, err := NewServer(Config{Tracing: tr})
	if err != nil {
		t.Fatal(err)
	}
	c := memServer(t, s) // no model yet: every route answers 503
	send := func(path, traceparent string) {
		req, _ := nethttp.NewRequest("GET", "http://superfluid"+path, nil)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Fatalf("%s while loading: %d", path, resp.StatusCode)
		}
	}
	send("/v1/files/file-abc", "00-11111111111111111111111111111111-2222222222222222-01")
	send("/v1/files/file-xyz", "00-"+strings.Repeat("z", 32)+"-nothex-01")
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, ok := col.WaitFor(10*time.Second, func(s []tracingtest.Span) bool { return len(s) >= 2 })
	if !ok || len(spans) != 2 {
		t.Fatalf("spans %+v", spans)
	}
	for i, sp := range spans {
		if sp.Name != "GET /v1/files/{id}" || sp.Attrs["http.route"] != "/v1/files/{id}" || sp.Attrs["superfluid.api"] != "openai" ||
			sp.Attrs["http.response.status_code"] != "503" || !sp.StatusError {
			t.Errorf("span %d: %+v", i, sp)
		}
	}
	if spans[0].TraceID != "11111111111111111111111111111111" || spans[0].ParentID != "2222222222222222" {
		t.Errorf("the well-formed traceparent was not the parent: %+v", spans[0])
	}
	if spans[1].ParentID != "" || spans[1].TraceID == spans[0].TraceID {
		t.Errorf("a malformed traceparent was taken: %+v", spans[1])
	}
}
