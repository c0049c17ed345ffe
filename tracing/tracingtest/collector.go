// Package tracingtest is an OTLP/HTTP trace collector on loopback for
// tests: it accepts POST /v1/traces (protobuf, gzip or not), decodes the
// spans with OpenTelemetry's own protocol types and keeps them, and counts
// the connections made to it.
package tracingtest

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Name                  string
	TraceID, ID, ParentID string // hex; ParentID "" for a root
	Start, End            time.Time
	Attrs                 map[string]string // values formatted with %v
	Resource              map[string]string
	Events                []string
	StatusError           bool
}

// Collector is a running test collector.
type Collector struct {
	URL   string // http://127.0.0.1:port, for OTEL_EXPORTER_OTLP_ENDPOINT
	srv   *http.Server
	mu    sync.Mutex
	spans []Span
	conns int
	bad   []string
	got   chan struct{} // signalled on every accepted export
}

// Start listens on a loopback port until the test ends.
func Start(t testing.TB) *Collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Collector{URL: "http://" + ln.Addr().String(), got: make(chan struct{}, 1)}
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.mu.Lock()
			c.conns++
			c.mu.Unlock()
		}
	}}
	go c.srv.Serve(ln)
	t.Cleanup(func() { c.srv.Close() })
	return c
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		c.fail(fmt.Sprintf("%s %s", r.Method, r.URL.Path))
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			c.fail("gzip: " + err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		c.fail(fmt.Sprintf("body (%s): %v", r.Header.Get("Content-Type"), err))
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Name: s.Name, TraceID: fmt.Sprintf("%x", s.TraceId), ID: fmt.Sprintf("%x", s.SpanId),
					Start: time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano)),
					Attrs: attrs(s.Attributes), Resource: res, StatusError: s.GetStatus().GetCode() == 2}
				if len(s.ParentSpanId) > 0 {
					sp.ParentID = fmt.Sprintf("%x", s.ParentSpanId)
				}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, e.Name)
				}
				c.spans = append(c.spans, sp)
			}
		}
	}
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(out)
}

func (c *Collector) fail(why string) {
	c.mu.Lock()
	c.bad = append(c.bad, why)
	c.mu.Unlock()
}

func attrs(kvs []*common.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *common.AnyValue_StringValue:
			m[kv.Key] = x.StringValue
		case *common.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(x.IntValue)
		case *common.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(x.BoolValue)
		case *common.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

// Spans is what has been received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Conns is how many connections were made to the collector.
func (c *Collector) Conns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns
}

// Refused lists the requests the collector could not take (wrong path,
// content type or body).
func (c *Collector) Refused() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// WaitFor waits until done(spans) holds or bound passes, and returns the
// spans then; a test fails on false with what it got.
func (c *Collector) WaitFor(bound time.Duration, done func([]Span) bool) ([]Span, bool) {
	deadline := time.After(bound)
	for {
		if s := c.Spans(); done(s) {
			return s, true
		}
		select {
		case <-c.got:
		case <-deadline:
			return c.Spans(), false
		}
	}
}
