package bench

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A run with a failed request says so: the failures are counted with the
// first one's message, and the target is not met however good the rest
// looks (the figures leave failed requests out).

func failOn(path string, hit int) func(string, int, map[string]any) int {
	return func(p string, n int, _ map[string]any) int {
		if p == path && n == hit {
			return 500
		}
		return 0
	}
}

func expectOneFailure(t *testing.T, rep *Report, want string) {
	t.Helper()
	if rep.Failures == nil || rep.Failures.Count != 1 || !strings.Contains(rep.Failures.FirstError, want) {
		t.Fatalf("failures %+v, want one whose error says %q", rep.Failures, want)
	}
	if rep.Key == nil || rep.Key.Met == nil || *rep.Key.Met {
		t.Fatalf("key %+v: a run with a failed request must not be met", rep.Key)
	}
	if len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], want) {
		t.Fatalf("errors %v", rep.Errors)
	}
}

func TestDecodeFailureIsNeverMet(t *testing.T) {
	cfg := Config{Scenario: Decode, Concurrency: 1, Requests: 4, MaxTokens: 8, PromptTokens: 20, ReferenceTPS: 1e-9}
	clean := newFake(t, func(f *fakeServer) { f.tokensPerWord = 1 })
	cfg.URL = clean.URL
	if rep := run(t, cfg); rep.Failures != nil || rep.Key == nil || rep.Key.Met == nil || !*rep.Key.Met {
		t.Fatalf("without a failure: failures %+v key %+v", rep.Failures, rep.Key)
	}
	// Hit 1 is the warm-up; 4 is the third measured generation.
	f := newFake(t, func(f *fakeServer) { f.tokensPerWord = 1; f.fail = failOn("/v1/completions", 4) })
	cfg.URL = f.URL
	rep := run(t, cfg)
	if rep.Requests != (Counts{OK: 3, Failed: 1}) {
		t.Fatalf("requests %+v", rep.Requests)
	}
	expectOneFailure(t, rep, "HTTP 500: injected failure")
}

// The case: one loaded-phase /infill fails and the report still
// said "met": true.
func TestFIMFailureIsNeverMet(t *testing.T) {
	// Hit 1 is the warm-up, 2–4 the idle phase, 5–7 the loaded one.
	f := newFake(t, func(f *fakeServer) { f.blockBackground = true; f.fail = failOn("/infill", 6) })
	rep := run(t, Config{URL: f.URL, Scenario: FIMUnderLoad, Concurrency: 1, Requests: 3, MaxTokens: 4, PromptTokens: 50, Settle: time.Minute, FIMStream: true})
	if rep.FIM.Loaded.Requests != (Counts{OK: 2, Failed: 1}) || rep.FIM.Idle.Requests != (Counts{OK: 3}) {
		t.Fatalf("idle %+v loaded %+v", rep.FIM.Idle.Requests, rep.FIM.Loaded.Requests)
	}
	expectOneFailure(t, rep, "HTTP 500: injected failure")
}

func TestMultiTurnFailureIsNeverMet(t *testing.T) {
	// Hit 1 is the warm-up; conversation 0 is hits 2–4, so 3 is its turn 2
	// (its turn 3 is never sent), and conversation 1 completes.
	f := newFake(t, func(f *fakeServer) { f.fail = failOn("/v1/chat/completions", 3) })
	rep := run(t, Config{URL: f.URL, Scenario: MultiTurn, Concurrency: 1, Requests: 2, Turns: 3, MaxTokens: 4, PromptTokens: 50})
	if rep.Requests != (Counts{OK: 4, Failed: 1}) {
		t.Fatalf("requests %+v", rep.Requests)
	}
	expectOneFailure(t, rep, "HTTP 500: injected failure")
}

// A stream cut before its last event is a failure, not a short answer.
func TestTruncatedStreamIsAFailure(t *testing.T) {
	f := newFake(t, func(f *fakeServer) {
		f.tokensPerWord = 1
		f.cut = func(p string, n int, _ map[string]any) bool { return p == "/v1/completions" && n == 3 }
	})
	rep := run(t, Config{URL: f.URL, Scenario: Decode, Concurrency: 1, Requests: 3, MaxTokens: 8, PromptTokens: 20, ReferenceTPS: 1e-9})
	if rep.Requests != (Counts{OK: 2, Failed: 1}) {
		t.Fatalf("requests %+v", rep.Requests)
	}
	expectOneFailure(t, rep, errTruncated.Error())
}

// A warm-up whose connection the server drops before answering (a
// keep-alive connection it closed as the client reused it) is sent again
// once, not reported as the run's failure.
func TestWarmUpResentAfterADroppedConnection(t *testing.T) {
	f := newFake(t, nil)
	var drops atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/infill" && drops.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		rp := httputil.NewSingleHostReverseProxy(mustURL(t, f.URL))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	rep := run(t, Config{URL: proxy.URL, Scenario: FIMUnderLoad, Concurrency: 1, Requests: 1, MaxTokens: 4, PromptTokens: 50, Settle: time.Minute, FIMStream: true})
	if drops.Load() < 2 || rep.FIM == nil || rep.FIM.Idle.Requests.OK != 1 {
		t.Fatalf("%d infill requests reached the proxy; report %+v", drops.Load(), rep.FIM)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
