package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// soakFake answers the soak's seven endpoints the way each API does, in a
// few tokens, and refuses what a careful server refuses: invalid UTF-8 and
// a bias that bans every token. Tests inject a failure through fail.
type soakFake struct {
	*httptest.Server
	vocab int
	// fail, when it returns a status, answers a request with it instead.
	fail func(path string, body map[string]any) int
	// busy keeps superfluid_lanes_active at 1: a lane that never frees.
	busy bool
	// servesCrossSite serves requests from other sites' pages (a foreign
	// Origin, a rebound Host) like any other; by default they are 403.
	servesCrossSite bool
	// goroutines is what go_goroutines says once the traffic began
	// (before it: baseGoroutines); 0 exports none.
	goroutines, baseGoroutines int
	counted, started           bool // go_goroutines was read; a request came after that

	mu       sync.Mutex
	seen     map[string]int // requests by path
	poisoned int            // requests with invalid UTF-8 that arrived as sent
}

func newSoakFake(t *testing.T, configure func(*soakFake)) *soakFake {
	f := &soakFake{vocab: 300, seen: map[string]int{}}
	if configure != nil {
		configure(f)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"data":[{"id":"fake","meta":{"n_vocab":%d}}]}`, f.vocab)
	})
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"default_generation_settings":{"n_ctx":4096}}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		busy := 0
		if f.busy {
			busy = 1
		}
		fmt.Fprintf(w, "# TYPE superfluid_lanes_active gauge\nsuperfluid_lanes_active %d\nsuperfluid_queue_depth{class=\"chat\"} 0\n", busy)
		f.mu.Lock()
		defer f.mu.Unlock()
		if g := f.baseGoroutines; g > 0 {
			if f.started {
				g = f.goroutines
			}
			f.counted = true
			fmt.Fprintf(w, "# TYPE go_goroutines gauge\ngo_goroutines %d\n", g)
		}
	})
	for _, ep := range soakEndpoints {
		mux.HandleFunc("POST "+ep.path, f.generate)
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			f.mu.Lock()
			f.started = f.started || f.counted
			f.mu.Unlock()
		}
		host, _, _ := strings.Cut(r.Host, ":")
		origin := r.Header.Get("Origin")
		if !f.servesCrossSite && (host != "127.0.0.1" || (origin != "" && !strings.HasPrefix(origin, "http://127.0.0.1:"))) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":{"code":403,"message":"cross-site request refused","type":"forbidden"}}`)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *soakFake) generate(w http.ResponseWriter, r *http.Request) {
	raw := make([]byte, 0, 1<<10)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		raw = append(raw, buf[:n]...)
		if err != nil {
			break
		}
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.seen[r.URL.Path]++
	f.mu.Unlock()
	if !utf8.Valid(raw) || strings.Contains(string(raw), `\ud800`) {
		f.mu.Lock()
		f.poisoned++
		f.mu.Unlock()
		http.Error(w, `{"error":"the prompt is not UTF-8"}`, http.StatusBadRequest)
		return
	}
	if bias, ok := body["logit_bias"].([]any); ok && len(bias) >= f.vocab {
		http.Error(w, `{"error":"logit_bias bans every token"}`, http.StatusBadRequest)
		return
	}
	if f.fail != nil {
		if status := f.fail(r.URL.Path, body); status != 0 {
			http.Error(w, `{"error":{"message":"injected failure"}}`, status)
			return
		}
	}
	f.answer(w, r.URL.Path, body["stream"] == true)
}

// answer writes four tokens in the path's protocol.
func (f *soakFake) answer(w http.ResponseWriter, path string, stream bool) {
	piece := func(last bool) any {
		text := "tok "
		if last {
			text = ""
		}
		switch path {
		case "/v1/chat/completions":
			return map[string]any{"choices": []any{map[string]any{"delta": map[string]any{"content": text}, "message": map[string]any{"content": text}}}}
		case "/v1/completions":
			return map[string]any{"choices": []any{map[string]any{"text": text}}}
		case "/completion", "/infill":
			return map[string]any{"content": text, "stop": last}
		case "/api/generate":
			return map[string]any{"response": text, "done": last}
		case "/api/chat":
			return map[string]any{"message": map[string]any{"role": "assistant", "content": text}, "done": last}
		}
		if last {
			return map[string]any{"type": "message_stop"}
		}
		return map[string]any{"type": "content_block_delta", "delta": map[string]any{"type": "text_delta", "text": text}}
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(piece(false))
		return
	}
	ndjson := strings.HasPrefix(path, "/api/")
	w.Header().Set("Content-Type", map[bool]string{true: "application/x-ndjson", false: "text/event-stream"}[ndjson])
	send := func(v any) {
		b, _ := json.Marshal(v)
		if ndjson {
			fmt.Fprintf(w, "%s\n", b)
		} else {
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		w.(http.Flusher).Flush()
	}
	for range 4 {
		send(piece(false))
	}
	switch {
	case strings.HasPrefix(path, "/v1/c"):
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		send(piece(true))
	}
}

func soakRun(t *testing.T, cfg Config) *Report {
	t.Helper()
	if cfg.Duration == 0 {
		cfg.Duration = time.Minute // the request count ends these runs
	}
	cfg.Scenario, cfg.IdleWait = Soak, time.Second
	return run(t, cfg)
}

// A clean soak against a server that behaves: every endpoint, class,
// behaviour and poison value is sent, the invalid bytes arrive as sent,
// and nothing is counted against the server.
func TestSoakMixesEverything(t *testing.T) {
	f := newSoakFake(t, nil)
	rep := soakRun(t, Config{URL: f.URL, Concurrency: 8, Requests: 800, MaxTokens: 8, PromptTokens: 40})
	s := rep.Soak
	sent := 800 + len(soakEndpoints) // and a probe of each endpoint first
	if s == nil || s.Sent != sent || rep.Failures != nil || s.Undocumented5xx+s.Broken+s.UnexpectedRefusals != 0 || len(s.Problems) != 0 {
		t.Fatalf("soak %+v failures %+v", s, rep.Failures)
	}
	if !s.ServerAlive || s.LanesIdle == nil || !*s.LanesIdle || rep.Key == nil || rep.Key.Met == nil || !*rep.Key.Met {
		t.Fatalf("alive %v idle %v key %+v", s.ServerAlive, s.LanesIdle, rep.Key)
	}
	for _, ep := range soakEndpoints {
		if len(s.ByEndpoint[ep.path]) == 0 {
			t.Errorf("nothing sent to %s: %v", ep.path, s.ByEndpoint)
		}
	}
	for _, c := range append(soakClasses, "fim") {
		if len(s.ByClass[c]) == 0 {
			t.Errorf("no request of class %s: %v", c, s.ByClass)
		}
	}
	for b := readWhole; b <= hangUpAfter; b++ {
		if s.Behaviours[b.String()] == 0 {
			t.Errorf("no %s: %v", b, s.Behaviours)
		}
	}
	for _, p := range []string{poisonTinyTemperature, poisonBansMany, poisonBansAll, poisonHugeMaxTokens, poisonInvalidUTF8, poisonControlTokens,
		hostileDeepGrammar, hostileEnumIntersection, hostileDeepPattern, hostileLongStops, hostileDeepToolSchema, hostileCrossOrigin, hostileReboundHost} {
		if len(s.Poisons[p]) == 0 {
			t.Errorf("poison %s never sent: %v", p, s.Poisons)
		}
	}
	if s.Poisons[poisonBansAll]["400"] == 0 || f.poisoned == 0 || s.Poisons[poisonInvalidUTF8]["400"] == 0 {
		t.Errorf("the refusable poisons were not refused: %v (invalid UTF-8 seen %d)", s.Poisons, f.poisoned)
	}
	for _, p := range []string{hostileCrossOrigin, hostileReboundHost} {
		if s.Poisons[p]["403"] == 0 || s.Poisons[p]["200"] != 0 {
			t.Errorf("%s: %v, want every answer 403", p, s.Poisons[p])
		}
	}
	if rep.Requests.Cancelled == 0 || rep.Requests.OK+rep.Requests.Cancelled != sent {
		t.Errorf("requests %+v: the hang-ups are the client's own", rep.Requests)
	}
}

// A server that serves other sites' pages — a cross-site Origin, a
// rebound Host — is named for it, and the run is not met.
func TestSoakNamesAServerThatServesOtherSites(t *testing.T) {
	f := newSoakFake(t, func(f *soakFake) { f.servesCrossSite = true })
	rep := soakRun(t, Config{URL: f.URL, Concurrency: 4, Requests: 300, MaxTokens: 8, PromptTokens: 40})
	s := rep.Soak
	if s.CrossSiteServed == 0 || s.CrossSiteServed != s.Poisons[hostileCrossOrigin]["200"]+s.Poisons[hostileReboundHost]["200"] || *rep.Key.Met {
		t.Fatalf("cross-site served %d, poisons %v, key %+v", s.CrossSiteServed, s.Poisons, rep.Key)
	}
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "not answered 403") {
		t.Fatalf("problems %v", s.Problems)
	}
}

// The server's goroutines are counted before the traffic and after it
// settles: a server left with more is named, one back to its count is not.
func TestSoakCountsGoroutinesLeftBehind(t *testing.T) {
	for _, after := range []int{40, 41} {
		f := newSoakFake(t, func(f *soakFake) { f.baseGoroutines, f.goroutines = 40, after })
		rep := soakRun(t, Config{URL: f.URL, Concurrency: 2, Requests: 20, MaxTokens: 4, PromptTokens: 20})
		g := rep.Soak.Goroutines
		if g == nil || g.Start != 40 || g.End != after || g.Back != (after == 40) || *rep.Key.Met != (after == 40) {
			t.Fatalf("after %d: goroutines %+v, problems %v", after, g, rep.Soak.Problems)
		}
	}
}

// One injected 500 among well-formed requests: counted, named first,
// kept for re-sending, and the run is not met. A 503 is documented and
// counts against nothing.
func TestSoakReportsOneInjectedFailure(t *testing.T) {
	var mu sync.Mutex
	sent := map[int]bool{}
	// A whole answer to a well-formed request of a normal size is one no
	// client hangs up on, so the injected status is surely read.
	plain := func(path string, b map[string]any) bool {
		p, _ := b["prompt"].(string)
		_, biased := b["logit_bias"]
		return path == "/completion" && b["stream"] == false && !biased && b["temperature"] != 1e-40 &&
			b["n_predict"].(float64) < hugeMaxTokens && !strings.Contains(p, "<|") && len(strings.Fields(p)) < 60
	}
	for _, status := range []int{500, 503} {
		f := newSoakFake(t, func(f *soakFake) {
			f.fail = func(path string, b map[string]any) int {
				mu.Lock()
				defer mu.Unlock()
				if !plain(path, b) || sent[status] {
					return 0
				}
				sent[status] = true
				return status
			}
		})
		rep := soakRun(t, Config{URL: f.URL, Concurrency: 4, Requests: 200, MaxTokens: 8, PromptTokens: 40})
		s := rep.Soak
		if !sent[status] {
			t.Fatalf("no request matched the injection: %v", s.ByEndpoint)
		}
		if status == 503 {
			if s.Documented5xx != 1 || rep.Failures != nil || !*rep.Key.Met {
				t.Errorf("a 503: documented %d failures %+v key %+v", s.Documented5xx, rep.Failures, rep.Key)
			}
			continue
		}
		if s.Undocumented5xx != 1 || s.ByEndpoint["/completion"]["500"] != 1 || len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "1 undocumented 5xx") {
			t.Fatalf("undocumented %d, /completion %v, problems %v", s.Undocumented5xx, s.ByEndpoint["/completion"], s.Problems)
		}
		expectOneFailure(t, rep, "POST /completion: 500: injected failure")
		if len(s.Repro) != 1 || s.Repro[0].Endpoint != "/completion" || !strings.Contains(s.Repro[0].Body, `"n_predict"`) {
			t.Fatalf("repro %+v", s.Repro)
		}
	}
}

// A server that dies mid-run: the soak says so, stops by itself well
// before its duration, and is not met.
func TestSoakNoticesACrash(t *testing.T) {
	var once sync.Once
	var f *soakFake
	f = newSoakFake(t, func(sf *soakFake) {
		sf.fail = func(string, map[string]any) int {
			sf.mu.Lock()
			n := sf.seen["/v1/chat/completions"] + sf.seen["/completion"]
			sf.mu.Unlock()
			if n > 20 {
				once.Do(func() { f.Listener.Close(); go f.CloseClientConnections() })
			}
			return 0
		}
	})
	start := time.Now()
	rep := soakRun(t, Config{URL: f.URL, Concurrency: 4, Duration: 10 * time.Minute, MaxTokens: 8, PromptTokens: 40})
	s := rep.Soak
	if s.ServerAlive || s.DownAfterS == nil || !strings.Contains(s.DownReason, "unreachable") || *rep.Key.Met {
		t.Fatalf("alive %v after %v (%s), key %+v", s.ServerAlive, s.DownAfterS, s.DownReason, rep.Key)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("the soak ran %v after the server went away", d)
	}
}

// A lane that never frees is a problem the soak names.
func TestSoakNoticesBusyLanes(t *testing.T) {
	f := newSoakFake(t, func(f *soakFake) { f.busy = true })
	rep := soakRun(t, Config{URL: f.URL, Concurrency: 2, Requests: 20, MaxTokens: 4, PromptTokens: 20})
	s := rep.Soak
	if s.LanesIdle == nil || *s.LanesIdle || len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "superfluid_lanes_active=1") || *rep.Key.Met {
		t.Fatalf("idle %v problems %v key %+v", s.LanesIdle, s.Problems, rep.Key)
	}
}

// Resident memory: flat within 10% of the post-warm-up baseline, or not.
func TestSoakRSSVerdict(t *testing.T) {
	t0 := time.Now()
	series := func(f func(i int) int64) *watcher {
		w := &watcher{source: "test"}
		for i := range 40 {
			w.samples = append(w.samples, rssSample{at: t0.Add(time.Duration(i) * time.Second), bytes: f(i)})
		}
		return w
	}
	const mib = 1 << 20
	warm := series(func(i int) int64 { // grows in warm-up, then wobbles
		if i < 10 {
			return int64(100+10*i) * mib
		}
		return int64(200+i%3) * mib
	}).rss()
	if warm.Flat == nil || !*warm.Flat || warm.BaselineMiB < 200 || warm.BaselineMiB > 202 {
		t.Fatalf("warm-up growth then flat: %+v", warm)
	}
	leak := series(func(i int) int64 { return int64(200+2*i) * mib }).rss()
	if leak.Flat == nil || *leak.Flat || leak.Growth < 0.1 {
		t.Fatalf("a steady leak: %+v", leak)
	}
	few := (&watcher{source: "test", samples: []rssSample{{t0, 1}, {t0.Add(time.Second), 2}}}).rss()
	if few.Flat != nil {
		t.Fatalf("two samples are too few for a verdict: %+v", few)
	}
	if n := vmRSS("Name:\tsuperfluid\nVmRSS:\t  123456 kB\nVmSwap:\t0 kB\n"); n != 123456<<10 {
		t.Fatalf("VmRSS parsed as %d", n)
	}
}

// The soak sends hostile traffic: never to another host.
func TestSoakOnlyOnLoopback(t *testing.T) {
	for _, u := range []string{"http://example.com:8080", "http://10.0.0.1", "http://[::2]:80"} {
		if _, err := Run(t.Context(), Config{URL: u, Scenario: Soak}); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: err = %v", u, err)
		}
	}
	for _, h := range []string{"localhost", "127.0.0.1", "127.1.2.3", "::1"} {
		if !loopbackHost(h) {
			t.Errorf("%s is loopback", h)
		}
	}
}
