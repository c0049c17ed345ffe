package bench

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fim-under-load with --background-url: FIM requests to one server, the
// background load to another (an editor's FIM model and a larger model as
// two processes), each server sized by its own tokenizer.

func TestFIMUnderLoadOnTwoServers(t *testing.T) {
	bg := newFake(t, func(f *fakeServer) { f.blockBackground = true; f.tokensPerWord = 2; f.modelID = "big-model" })
	// The FIM server sees how many background requests run on the other
	// server as each FIM request arrives.
	var mu sync.Mutex
	var loadBeside []int
	fim := newFake(t, func(f *fakeServer) {
		f.tokensPerWord = 1
		f.hook = func(r *http.Request, _ int) {
			if r.URL.Path != "/infill" {
				return
			}
			bg.mu.Lock()
			n := bg.bgActive
			bg.mu.Unlock()
			mu.Lock()
			loadBeside = append(loadBeside, n)
			mu.Unlock()
		}
	})
	rep := run(t, Config{URL: fim.URL, BackgroundURL: bg.URL + "/", Scenario: FIMUnderLoad, Concurrency: 3, Requests: 2,
		MaxTokens: 4, PromptTokens: 400, FIMPromptTokens: 100, Settle: time.Minute, FIMStream: true})
	fr := rep.FIM
	if fr.URL != fim.URL || fr.Endpoint != "/infill" || fr.BackgroundURL != bg.URL || fr.BackgroundModel != "big-model" || fr.BackgroundEndpoint != "/v1/completions" {
		t.Fatalf("endpoints: fim %s%s, background %s%s model %q", fr.URL, fr.Endpoint, fr.BackgroundURL, fr.BackgroundEndpoint, fr.BackgroundModel)
	}
	if rep.URL != fim.URL || rep.Model != "fake-model" {
		t.Fatalf("report url %q model %q: the FIM server's", rep.URL, rep.Model)
	}
	if s := fr.BackgroundPromptSizing; s == nil || !s.Calibrated || s.TokensPerWord != 2 || rep.Settings.Prompt.TokensPerWord != 1 {
		t.Fatalf("sizing: fim %+v background %+v", rep.Settings.Prompt, fr.BackgroundPromptSizing)
	}
	if fr.Idle.Requests != (Counts{OK: 2}) || fr.Loaded.Requests != (Counts{OK: 2}) || fr.Background.Requests != (Counts{Cancelled: 3}) || fr.LatencyRatioP95 == nil || rep.Failures != nil {
		t.Fatalf("idle %+v loaded %+v background %+v ratio %v failures %+v", fr.Idle.Requests, fr.Loaded.Requests, fr.Background.Requests, fr.LatencyRatioP95, rep.Failures)
	}
	// The warm-up and the idle phase beside no load, the loaded phase
	// beside all three background requests.
	if want := []int{0, 0, 0, 3, 3}; !equalInts(loadBeside, want) {
		t.Fatalf("background requests running as each FIM request arrived: %v, want %v", loadBeside, want)
	}
	for _, r := range fim.all() {
		if r.class == "background" {
			t.Fatalf("background request at the FIM server: %s %v", r.path, r.body)
		}
		if r.body["model"] != "fake-model" {
			t.Fatalf("FIM server request names %v", r.body["model"])
		}
	}
	var prompts int
	for _, r := range bg.all() {
		if r.path == "/infill" || r.body["suffix"] != nil {
			t.Fatalf("FIM request at the background server: %s %v", r.path, r.body)
		}
		if r.body["model"] != "big-model" {
			t.Fatalf("background server request names %v, want its own model", r.body["model"])
		}
		if r.class == "background" && r.body["max_tokens"] != 1.0 {
			prompts++
			// 400 tokens at its 2 tokens a word, not the FIM server's 1.
			if n := len(strings.Fields(r.body["prompt"].(string))); n < 190 || n > 215 {
				t.Fatalf("background prompt of %d words, want about 200", n)
			}
		}
	}
	if prompts != 3 {
		t.Fatalf("%d background prompts at the background server, want 3", prompts)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// --background-model on the one server: the load names that model, the
// FIM requests the discovered one (a server routes each by its name).
func TestFIMBackgroundModelOnOneServer(t *testing.T) {
	f := newFake(t, func(f *fakeServer) { f.blockBackground = true })
	rep := run(t, Config{URL: f.URL, BackgroundModel: "big-model", Scenario: FIMUnderLoad, Concurrency: 1, Requests: 1, MaxTokens: 4, PromptTokens: 50, Settle: time.Minute})
	if fr := rep.FIM; fr.BackgroundURL != f.URL || fr.BackgroundModel != "big-model" || fr.BackgroundPromptSizing != nil || fr.Background.Requests.Cancelled != 1 {
		t.Fatalf("fim report %+v", fr)
	}
	bgSeen := 0
	for _, r := range f.all() {
		want := "fake-model"
		if r.class == "background" {
			want = "big-model"
			bgSeen++
		}
		if r.body["model"] != want {
			t.Fatalf("%s (class %q) names %v, want %s", r.path, r.class, r.body["model"], want)
		}
	}
	if bgSeen != 2 { // the warm-up and the one background prompt
		t.Fatalf("%d background requests, want 2", bgSeen)
	}
}

// A background server that cannot be reached fails the run before any
// FIM request is measured, saying which server it was.
func TestUnreachableBackgroundURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f := newFake(t, nil)
	_, err = Run(context.Background(), Config{URL: f.URL, BackgroundURL: "http://" + addr, Scenario: FIMUnderLoad, Requests: 1, Timeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "cannot reach http://"+addr) || !strings.Contains(err.Error(), "--background-url") {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests("/infill")); n != 0 {
		t.Fatalf("%d FIM requests sent before the background server was checked", n)
	}
}

func TestBadBackgroundConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "http://x", Scenario: FIMUnderLoad, BackgroundURL: "x:8080"}, `--background-url "x:8080"`},
		{Config{URL: "http://x", Scenario: FIMUnderLoad, BackgroundURL: "ftp://x"}, `--background-url "ftp://x"`},
		{Config{URL: "http://x", Scenario: Decode, BackgroundURL: "http://y"}, "for --scenario fim-under-load"},
		{Config{URL: "http://x", Scenario: MultiTurn, BackgroundModel: "m"}, "for --scenario fim-under-load"},
	} {
		if _, err := Run(context.Background(), tc.cfg); err == nil || !strings.HasPrefix(err.Error(), "bench: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
