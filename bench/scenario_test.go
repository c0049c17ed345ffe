package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Second
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report does not marshal: %v", err)
	}
	return rep
}

func TestDecodeStreamsAndMeasures(t *testing.T) {
	f := newFake(t, func(f *fakeServer) { f.tokensPerWord = 2 })
	rep := run(t, Config{URL: f.URL, Scenario: Decode, Concurrency: 2, Requests: 4, MaxTokens: 16, PromptTokens: 100, Seed: 3, ReferenceTPS: 50})
	if rep.Requests != (Counts{OK: 4}) || rep.Endpoint != "/v1/completions" || rep.Model != "fake-model" {
		t.Fatalf("requests %+v endpoint %q model %q", rep.Requests, rep.Endpoint, rep.Model)
	}
	if rep.TTFTMs == nil || rep.TTFTMs.N != 4 || rep.LatencyMs == nil || rep.StreamTokensPerS == nil || rep.TokensPerS == nil || *rep.TokensPerS <= 0 {
		t.Fatalf("not measured: ttft %+v latency %+v streams %+v aggregate %v", rep.TTFTMs, rep.LatencyMs, rep.StreamTokensPerS, rep.TokensPerS)
	}
	if rep.CompletionTokens != 64 || rep.CachedPromptShare == nil || rep.Key == nil || rep.Key.Name != "decode_vs_engine" || rep.Key.Met == nil {
		t.Fatalf("completion %d cached %v key %+v", rep.CompletionTokens, rep.CachedPromptShare, rep.Key)
	}
	if !rep.Settings.Prompt.Calibrated || rep.Settings.Prompt.TokensPerWord != 2 {
		t.Fatalf("calibration %+v", rep.Settings.Prompt)
	}
	reqs := f.requests("/v1/completions")
	if len(reqs) != 5 { // a warm-up, then four
		t.Fatalf("%d completion requests, want 5", len(reqs))
	}
	prompt := reqs[1].body["prompt"].(string)
	if n := len(strings.Fields(prompt)); n != 50 {
		t.Errorf("prompt has %d words; 100 tokens at 2 tokens/word is 50", n)
	}
	for _, r := range reqs[1:] {
		b := r.body
		if b["prompt"] != prompt || b["stream"] != true || b["temperature"] != 0.0 || b["ignore_eos"] != true || b["max_tokens"] != 16.0 || b["model"] != "fake-model" {
			t.Fatalf("decode request %v", b)
		}
	}
}

// --fim-ignore-eos has the measured FIM requests, not the warm-up, ask
// for all their tokens.
func TestFIMIgnoreEOSOnMeasuredRequests(t *testing.T) {
	f := newFake(t, func(f *fakeServer) { f.blockBackground = true; f.tokensPerWord = 1 })
	run(t, Config{URL: f.URL, Scenario: FIMUnderLoad, Concurrency: 1, Requests: 2, MaxTokens: 8, PromptTokens: 300, FIMPromptTokens: 200, Settle: time.Minute, FIMStream: true, FIMIgnoreEOS: true})
	infills := f.requests("/infill")
	if len(infills) != 5 {
		t.Fatalf("%d infill requests, want a warm-up then 2+2", len(infills))
	}
	for i, r := range infills {
		if got, want := r.body["ignore_eos"] == true, i > 0; got != want {
			t.Errorf("infill request %d: ignore_eos %v, want %v", i, r.body["ignore_eos"], want)
		}
	}
}

func TestDecodeFallsBackToChat(t *testing.T) {
	f := newFake(t, func(f *fakeServer) { f.noCompletions = true })
	rep := run(t, Config{URL: f.URL, Scenario: Decode, Requests: 2, MaxTokens: 8})
	if rep.Endpoint != "/v1/chat/completions" || rep.Requests.OK != 2 || rep.TokensPerS == nil {
		t.Fatalf("endpoint %q requests %+v tps %v", rep.Endpoint, rep.Requests, rep.TokensPerS)
	}
	if rep.Settings.Prompt.Calibrated {
		t.Fatal("no /tokenize: the estimate stays")
	}
}

func TestFIMUnderLoad(t *testing.T) {
	f := newFake(t, func(f *fakeServer) { f.blockBackground = true; f.tokensPerWord = 1 })
	rep := run(t, Config{URL: f.URL, Scenario: FIMUnderLoad, Concurrency: 2, Requests: 3, MaxTokens: 8, PromptTokens: 300, FIMPromptTokens: 200, Settle: time.Minute, FIMStream: true})
	fr := rep.FIM
	if fr == nil || fr.Endpoint != "/infill" || fr.BackgroundEndpoint != "/v1/completions" {
		t.Fatalf("fim report %+v", fr)
	}
	if fr.Idle.Requests.OK != 3 || fr.Loaded.Requests.OK != 3 || fr.Idle.TTFTMs == nil || fr.Loaded.LatencyMs == nil || fr.LatencyRatioP95 == nil || fr.TTFTRatioP95 == nil {
		t.Fatalf("phases idle %+v loaded %+v ratio %v", fr.Idle, fr.Loaded, fr.LatencyRatioP95)
	}
	if fr.Background.Requests.Cancelled != 2 || rep.Key == nil || rep.Key.Name != "fim_latency_p95_loaded_over_idle" || *rep.Key.Target != 1.5 {
		t.Fatalf("background %+v key %+v", fr.Background.Requests, rep.Key)
	}
	if fr.Idle.CachedPromptShare == nil {
		t.Fatal("timings.cache_n not read")
	}
	infills := f.requests("/infill")
	if len(infills) != 7 || infills[0].body["n_predict"] != 0.0 {
		t.Fatalf("%d infill requests (want a warm-up with n_predict 0, then 3+3)", len(infills))
	}
	seen := map[string]bool{}
	for i, r := range infills {
		b := r.body
		for _, k := range []string{"input_prefix", "input_suffix", "input_extra", "prompt", "n_predict", "cache_prompt", "samplers"} {
			if _, ok := b[k]; !ok {
				t.Fatalf("infill body lacks %s: %v", k, b)
			}
		}
		if _, ok := b["ignore_eos"]; ok {
			t.Fatalf("FIM request %d sends ignore_eos, which editors do not: %v", i, b)
		}
		key := b["prompt"].(string)
		if seen[key] {
			t.Fatalf("FIM request %d repeats an earlier cursor line %q", i, key)
		}
		seen[key] = true
		if want := map[bool]int{true: 2, false: 0}[i >= 4]; r.bgActive != want {
			t.Errorf("FIM request %d arrived beside %d background requests, want %d", i, r.bgActive, want)
		}
	}
	var bg []string
	for _, r := range f.requests("/v1/completions") {
		if r.class != "background" {
			t.Fatalf("background request without X-Superfluid-Class: background")
		}
		if r.body["max_tokens"] != 1.0 {
			bg = append(bg, r.body["prompt"].(string))
		}
	}
	if len(bg) != 2 || bg[0] == bg[1] || len(strings.Fields(bg[0])) < 290 {
		t.Fatalf("background prompts: %d, distinct %v, %d words", len(bg), len(bg) == 2 && bg[0] != bg[1], len(strings.Fields(bg[0])))
	}
}

func TestFIMFallsBackToCompletionsSuffix(t *testing.T) {
	f := newFake(t, func(f *fakeServer) { f.noInfill = true; f.blockBackground = true })
	rep := run(t, Config{URL: f.URL, Scenario: FIMUnderLoad, Concurrency: 1, Requests: 2, MaxTokens: 4, PromptTokens: 50, Settle: time.Minute})
	if rep.FIM.Endpoint != "/v1/completions" || rep.FIM.Loaded.Requests.OK != 2 {
		t.Fatalf("endpoint %q loaded %+v", rep.FIM.Endpoint, rep.FIM.Loaded.Requests)
	}
	for _, r := range f.requests("/v1/completions") {
		if r.class == "" && r.body["max_tokens"] != 1.0 { // not the warm-up or calibration
			if s, _ := r.body["suffix"].(string); !strings.Contains(s, "def ") {
				t.Fatalf("FIM over /v1/completions without the suffix: %v", r.body)
			}
		}
	}
}

func TestMultiTurnWarmsUp(t *testing.T) {
	f := newFake(t, nil)
	rep := run(t, Config{URL: f.URL, Scenario: MultiTurn, Concurrency: 2, Requests: 2, Turns: 3, MaxTokens: 5, PromptTokens: 400})
	mt := rep.MultiTurn
	if mt == nil || mt.Conversations != 2 || len(mt.Turns) != 3 || rep.Requests.OK != 6 {
		t.Fatalf("multi-turn %+v requests %+v", mt, rep.Requests)
	}
	for _, tr := range mt.Turns {
		if tr.TTFTMs == nil || tr.TTFTMs.N != 2 || tr.CachedTokens == nil {
			t.Fatalf("turn %d: %+v", tr.Turn, tr.Phase)
		}
	}
	if mt.ColdCachedShare == nil || *mt.ColdCachedShare > 0.1 || mt.WarmCachedShare == nil || *mt.WarmCachedShare < 0.8 {
		t.Fatalf("cached shares cold %v warm %v", mt.ColdCachedShare, mt.WarmCachedShare)
	}
	if mt.WarmOverColdTTFT == nil || rep.Key == nil || rep.Key.Name != "warm_over_cold_ttft" {
		t.Fatalf("ratio %v key %+v", mt.WarmOverColdTTFT, rep.Key)
	}
	// Turn 2 resends turn 1 with the reply and a new question.
	var turn2 map[string]any
	for _, r := range f.requests("/v1/chat/completions") {
		if msgs := r.body["messages"].([]any); len(msgs) == 4 {
			turn2 = r.body
		}
	}
	msgs := turn2["messages"].([]any)
	if msgs[2].(map[string]any)["role"] != "assistant" || msgs[2].(map[string]any)["content"] != strings.Repeat("tok ", 5) || turn2["stream_options"] == nil {
		t.Fatalf("turn 2 body %v", turn2)
	}

	// The same seed again, as after a restart: turn 1 is now warm, and a
	// cold baseline from the first report gives the restart ratio.
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(rep)
	cold, err := ColdTTFT(&buf)
	if err != nil || cold <= 0 {
		t.Fatalf("ColdTTFT: %v %v", cold, err)
	}
	again := run(t, Config{URL: f.URL, Scenario: MultiTurn, Requests: 1, Turns: 2, MaxTokens: 5, PromptTokens: 400, ColdTTFT: cold})
	if again.Key == nil || again.Key.Name != "turn1_ttft_after_restart_over_cold" || again.MultiTurn.RestartOverColdTTFT == nil {
		t.Fatalf("restart key %+v", again.Key)
	}
	if s := again.MultiTurn.ColdCachedShare; s == nil || *s < 0.9 {
		t.Fatalf("turn 1 of a repeated seed should be cached: %v", s)
	}
}

func TestOllamaAPI(t *testing.T) {
	f := newFake(t, func(f *fakeServer) { f.blockBackground = true })
	dec := run(t, Config{URL: f.URL, API: Ollama, Scenario: Decode, Requests: 1, MaxTokens: 6})
	if dec.Endpoint != "/api/generate" || dec.Model != "fake:latest" || dec.TokensPerS == nil || dec.CompletionTokens != 6 || dec.TTFTMs == nil {
		t.Fatalf("decode over Ollama: %+v", dec)
	}
	if p := dec.Settings.Prompt; !p.Calibrated || p.TokensPerWord != 1 {
		t.Fatalf("no /tokenize: calibrated from prompt_eval_count: %+v", p)
	}
	fim := run(t, Config{URL: f.URL, API: Ollama, Scenario: FIMUnderLoad, Concurrency: 1, Requests: 1, MaxTokens: 4, PromptTokens: 50, Settle: time.Minute, FIMStream: true})
	if fim.FIM.Endpoint != "/api/generate" || fim.FIM.LatencyRatioP95 == nil {
		t.Fatalf("FIM over Ollama: %+v", fim.FIM)
	}
	mt := run(t, Config{URL: f.URL, API: Ollama, Scenario: MultiTurn, Turns: 2, MaxTokens: 4, PromptTokens: 50})
	if mt.Endpoint != "/api/chat" || mt.Requests.OK != 2 || mt.MultiTurn.WarmOverColdTTFT == nil {
		t.Fatalf("multi-turn over Ollama: %+v", mt)
	}
	for _, r := range f.requests("/api/generate") {
		if r.class == "" && r.body["suffix"] == nil && r.body["raw"] != true {
			t.Fatalf("plain generation must be raw: %v", r.body)
		}
	}
}

func TestUnreachableURLIsOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Run(context.Background(), Config{URL: "http://" + addr, Scenario: Decode})
	if err == nil || !strings.Contains(err.Error(), "cannot reach http://"+addr) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{URL: "localhost:8080", Scenario: Decode},
		{URL: "http://x", Scenario: "soak"},
		{URL: "http://x", Scenario: Decode, API: "grpc"},
		{URL: "http://x", Scenario: Decode, Requests: -1},
	} {
		if _, err := Run(context.Background(), cfg); err == nil || !strings.HasPrefix(err.Error(), "bench: ") {
			t.Errorf("%+v: err = %v", cfg, err)
		}
	}
}

func TestCtrlCReturnsAPartialReport(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	// Ctrl-C while the first loaded FIM request waits for its answer.
	f := newFake(t, func(f *fakeServer) {
		f.blockBackground = true
		f.hook = func(r *http.Request, bgActive int) {
			if r.URL.Path == "/infill" && bgActive > 0 {
				cancel()
				<-r.Context().Done()
			}
		}
	})
	rep, err := Run(ctx, Config{URL: f.URL, Scenario: FIMUnderLoad, Concurrency: 1, Requests: 2, MaxTokens: 4, PromptTokens: 50, Settle: time.Minute})
	if err != nil || !rep.Interrupted {
		t.Fatalf("rep %+v err %v", rep, err)
	}
	fr := rep.FIM
	if fr.Idle.Requests != (Counts{OK: 2}) || fr.Loaded.Requests != (Counts{Cancelled: 1}) || fr.Background.Requests != (Counts{Cancelled: 1}) || len(rep.Errors) != 0 {
		t.Fatalf("idle %+v loaded %+v background %+v errors %v", fr.Idle.Requests, fr.Loaded.Requests, fr.Background.Requests, rep.Errors)
	}
}
