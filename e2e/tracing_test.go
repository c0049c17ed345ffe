package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/tracing"
	"superfluid/tracing/tracingtest"
)

// The traces of one request, through the real binary configured by the
// standard OTEL_* variables: a collector on loopback receives the HTTP
// request's span (under the client's traceparent) and, under it, the
// generation's life in the scheduler, each span naming model, class and
// API; /metrics counts the export queue.
func TestServeExportsTheSpansOfOneRequest(t *testing.T) {
	col := tracingtest.Start(t)
	p := startServe(t, []string{"SUPERFLUID_THREADS=1", "OTEL_EXPORTER_OTLP_ENDPOINT=" + col.URL,
		"OTEL_SERVICE_NAME=sf-e2e", "OTEL_BSP_SCHEDULE_DELAY=100"},
		"--model", tinyModel(t), "--port", "0", "--alias", "tiny", "--ctx", "4096", "--park-dir", "off")
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"model":"tiny","messages":[{"role":"user","content":"trace me"}],"max_tokens":6,"temperature":0}`
	req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	want := []string{"POST /v1/chat/completions", "superfluid.generate", "queue", "admission", "prefill", "prefill.step", "decode", "cache.publish"}
	spans, ok := col.WaitFor(30*time.Second, func(s []tracingtest.Span) bool {
		names := map[string]bool{}
		for _, sp := range s {
			names[sp.Name] = true
		}
		for _, w := range want {
			if !names[w] {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("spans received: %+v; refused %v\n%s", spans, col.Refused(), p.stderr)
	}
	var httpSpan, gen tracingtest.Span
	for _, s := range spans {
		switch s.Name {
		case "POST /v1/chat/completions":
			httpSpan = s
		case "superfluid.generate":
			gen = s
		}
	}
	if httpSpan.TraceID != traceID || httpSpan.ParentID != parentID || httpSpan.Attrs["superfluid.api"] != "openai" ||
		httpSpan.Attrs["http.route"] != "/v1/chat/completions" || httpSpan.Attrs["superfluid.model"] != "tiny" ||
		httpSpan.Attrs["http.response.status_code"] != "200" || httpSpan.Resource["service.name"] != "sf-e2e" {
		t.Errorf("HTTP span %+v", httpSpan)
	}
	if gen.ParentID != httpSpan.ID || gen.Attrs["superfluid.generated_tokens"] != "6" || gen.Attrs["superfluid.prompt_tokens"] == "" {
		t.Errorf("generation span %+v", gen)
	}
	for _, s := range spans {
		if s.TraceID != traceID {
			t.Errorf("span %s in another trace", s.Name)
		}
		if s.Name == httpSpan.Name {
			continue
		}
		if s.Attrs["superfluid.model"] != "tiny" || s.Attrs["superfluid.class"] != "chat" || s.Attrs["superfluid.api"] != "openai" {
			t.Errorf("span %s attributes %v", s.Name, s.Attrs)
		}
		if s.Name == "admission" && (s.Attrs["superfluid.cache.tier"] == "" || s.Attrs["superfluid.cache.matched_tokens"] == "") {
			t.Errorf("admission without the cache's match: %v", s.Attrs)
		}
	}
	// The exporter counts a batch once the collector's answer is back.
	pollUntil(t, 30*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, p.url)
		return m["superfluid_trace_queue_max_spans"] == 2048 && m["superfluid_trace_spans_exported_total"] >= float64(len(want)) &&
				m["superfluid_trace_spans_dropped_total"] == 0,
			fmt.Sprintf("export queue metrics: max %v exported %v dropped %v", m["superfluid_trace_queue_max_spans"],
				m["superfluid_trace_spans_exported_total"], m["superfluid_trace_spans_dropped_total"])
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.stderr)
	}
}

// Tracing off: an endpoint in the environment but OTEL_TRACES_EXPORTER=none
// (and, separately, OTEL_SDK_DISABLED) — the server serves, exits, and never
// connects to the collector; /metrics shows no export queue.
func TestServeWithTracingOffConnectsNowhere(t *testing.T) {
	for _, off := range []string{"OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true"} {
		t.Run(off, func(t *testing.T) {
			col := tracingtest.Start(t)
			p := startServe(t, []string{"SUPERFLUID_THREADS=1", "OTEL_EXPORTER_OTLP_ENDPOINT=" + col.URL, off},
				"--model", tinyModel(t), "--port", "0", "--alias", "tiny", "--ctx", "4096", "--park-dir", "off")
			resp, err := http.Post(p.url+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("chat: %d", resp.StatusCode)
			}
			m := scrapeMetrics(t, p.url)
			if v, ok := m["superfluid_trace_queue_max_spans"]; !ok || v != 0 || m["superfluid_trace_spans_exported_total"] != 0 {
				t.Errorf("an export queue while off: max %v (present %v), exported %v", v, ok, m["superfluid_trace_spans_exported_total"])
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			if code := p.wait(t, time.Minute); code != 0 {
				t.Fatalf("exit %d:\n%s", code, p.stderr)
			}
			if n := col.Conns(); n != 0 {
				t.Fatalf("%d connections to the collector with tracing off", n)
			}
			if strings.Contains(p.stderr.String(), "tracing:") {
				t.Errorf("the log speaks of tracing while off:\n%s", p.stderr)
			}
		})
	}
}

// A streamed answer outlives its handler: the request's span ends with the
// stream, after the generation it carried, and a preempted background
// request's trace shows the preemption and its warm resumption.
func TestTracedStreamAndPreemption(t *testing.T) {
	col := tracingtest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	tr, err := tracing.FromEnv(context.Background(), os.Getenv, "e2e")
	if err != nil || tr == nil {
		t.Fatalf("tracing: %v %v", tr, err)
	}
	st := startStack(t, app.Options{Lanes: 1, Ctx: 16384, Tracing: tr})
	// A background stream holds the one lane; a chat request preempts it.
	bg, _ := http.NewRequest("POST", st.URL()+"/v1/chat/completions", strings.NewReader(
		`{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":2000,"temperature":0,"stream":true}`))
	bg.Header.Set("X-Superfluid-Class", "background")
	resp, err := http.DefaultClient.Do(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for seen := 0; seen < 2 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			seen++
		}
	}
	chat, err := http.Post(st.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"now"}],"max_tokens":4,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, chat.Body)
	chat.Body.Close()
	for sc.Scan() { // the rest of the stream
	}
	resp.Body.Close()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, ok := col.WaitFor(30*time.Second, func(s []tracingtest.Span) bool {
		gens := 0
		for _, sp := range s {
			if sp.Name == "superfluid.generate" {
				gens++
			}
		}
		return gens == 2 && len(httpSpans(s)) == 2
	})
	if !ok {
		t.Fatalf("spans: %+v", spans)
	}
	var bgGen tracingtest.Span
	for _, s := range spans {
		if s.Name == "superfluid.generate" && s.Attrs["superfluid.class"] == "background" {
			bgGen = s
		}
	}
	var bgHTTP tracingtest.Span
	for _, h := range httpSpans(spans) {
		if h.ID == bgGen.ParentID {
			bgHTTP = h
		}
	}
	if bgHTTP.ID == "" || bgHTTP.End.Before(bgGen.End) {
		t.Fatalf("the stream's span %+v ends before its generation %+v", bgHTTP, bgGen)
	}
	if bgGen.Attrs["superfluid.preemptions"] != "1" || len(bgGen.Events) != 1 || bgGen.Events[0] != "preempted" {
		t.Fatalf("the background generation was not seen preempted: %+v", bgGen)
	}
	admissions, resumed := 0, 0
	for _, s := range spans {
		if s.Name == "admission" && s.ParentID == bgGen.ID {
			admissions++
			if s.Attrs["superfluid.resumed"] == "true" {
				resumed++
				if s.Attrs["superfluid.cache.tier"] != "resident" || s.Attrs["superfluid.cache.matched_tokens"] == "0" {
					t.Errorf("the resumption was not warm: %v", s.Attrs)
				}
			}
		}
	}
	if admissions != 2 || resumed != 1 {
		t.Fatalf("background admissions %d (resumed %d), want 2 (1)", admissions, resumed)
	}
}

func httpSpans(s []tracingtest.Span) []tracingtest.Span {
	var out []tracingtest.Span
	for _, sp := range s {
		if sp.Name == "POST /v1/chat/completions" {
			out = append(out, sp)
		}
	}
	return out
}
