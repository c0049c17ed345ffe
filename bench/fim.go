package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// FIMReport compares editor FIM requests idle and beside background load.
// The report's top-level figures are the loaded phase's.
type FIMReport struct {
	// URL and Endpoint are where the FIM requests went; BackgroundURL,
	// BackgroundModel and BackgroundEndpoint where the load went (the same
	// server unless --background-url), BackgroundPromptSizing its
	// tokenizer's calibration when it is another server.
	URL                    string   `json:"url"`
	Endpoint               string   `json:"endpoint"`
	BackgroundURL          string   `json:"background_url"`
	BackgroundModel        string   `json:"background_model,omitempty"`
	BackgroundEndpoint     string   `json:"background_endpoint"`
	BackgroundPromptSizing *sizer   `json:"background_prompt_sizing,omitempty"`
	Idle                   Phase    `json:"idle"`
	Loaded                 Phase    `json:"loaded"`
	LatencyRatioP50        *float64 `json:"latency_ratio_p50,omitempty"`
	LatencyRatioP95        *float64 `json:"latency_ratio_p95,omitempty"`
	TTFTRatioP95           *float64 `json:"ttft_ratio_p95,omitempty"`
	// Background is the load: requests that completed, failed, or were
	// still running when the loaded phase ended (cancelled).
	Background Phase `json:"background"`
	// BackgroundWorkers is how many background requests ran at once.
	BackgroundWorkers int `json:"background_workers"`
}

// fimTarget is the design notes' bound on loaded/idle FIM latency (p95).
const fimTarget = 1.5

// fimUnderLoad measures cfg.Requests FIM requests on an idle server, then
// the same number (distinct text, same shape) while cfg.Concurrency long
// background prompts prefill and decode, and reports the latency ratio.
func (r *runner) fimUnderLoad(ctx context.Context, rep *Report) error {
	cfg := r.cfg
	bg, err := r.backgroundRunner(ctx)
	if err != nil {
		return err
	}
	f := r.newFIMFile()
	fimEPs, bgEPs := []endpoint{epInfill, epCompletions}, bg.completionEndpoints()
	if cfg.API == Ollama {
		fimEPs = []endpoint{epGenerate}
	}
	// The warm-up is the editor's own (llama.vscode sends n_predict 0 when
	// a file opens): it also warms the file's shared prefix for both phases.
	fimEP, err := r.resolve(ctx, fimEPs, f.work(1<<20, 0, cfg.FIMStream))
	if err != nil {
		return err
	}
	bgEP, err := bg.resolve(ctx, bgEPs, work{prompt: warmupPrompt, maxTokens: 1, class: "background"})
	if err != nil {
		return err
	}
	fr := &FIMReport{URL: cfg.URL, Endpoint: fimEP.path, BackgroundURL: bg.cfg.URL, BackgroundModel: bg.model, BackgroundEndpoint: bgEP.path, BackgroundWorkers: cfg.Concurrency}
	if bg.c != r.c {
		fr.BackgroundPromptSizing = &bg.sizer
	}
	rep.Endpoint, rep.FIM = fimEP.path, fr

	slog.Info("bench: fim-under-load: idle phase", "url", cfg.URL, "endpoint", fimEP.path, "background_url", bg.cfg.URL, "requests", cfg.Requests)
	idle := r.fimPhase(ctx, fimEP, f, 0)
	fr.Idle = tally(idle, ctx, r.errs)
	if ctx.Err() != nil {
		return nil
	}

	slog.Info("bench: fim-under-load: starting background load", "requests", cfg.Concurrency, "prompt_tokens", cfg.PromptTokens, "endpoint", bgEP.path)
	bgCtx, stopLoad := context.WithCancel(ctx)
	load := bg.startLoad(bgCtx, bgEP, f.nonce)
	select {
	case <-load.ready:
	case <-ctx.Done():
	}
	slog.Info("bench: fim-under-load: loaded phase", "requests", cfg.Requests)
	loaded := r.fimPhase(ctx, fimEP, f, cfg.Requests)
	stopLoad()
	fr.Loaded = tally(loaded, ctx, r.errs)
	fr.Background = tally(load.wait(), bgCtx, r.errs)

	rep.Phase = fr.Loaded
	fr.LatencyRatioP50 = ratio(p50(fr.Loaded.LatencyMs), p50(fr.Idle.LatencyMs))
	fr.LatencyRatioP95 = ratio(p95(fr.Loaded.LatencyMs), p95(fr.Idle.LatencyMs))
	fr.TTFTRatioP95 = ratio(p95(fr.Loaded.TTFTMs), p95(fr.Idle.TTFTMs))
	if fr.LatencyRatioP95 != nil {
		rep.Key = newKey("fim_latency_p95_loaded_over_idle", *fr.LatencyRatioP95, fimTarget, "lower")
	}
	if fr.Background.Requests.OK+fr.Background.Requests.Cancelled == 0 {
		r.notes = append(r.notes, "no background request ran: the loaded phase measured an idle server")
	}
	return nil
}

// backgroundRunner is the runner the background load goes through: r
// itself when the load shares the FIM server and model; for
// --background-url a runner of its own (the server ready, its model found
// when none is named, prompts sized by its tokenizer). It shares r's error
// log, so a failed background request fails the run.
func (r *runner) backgroundRunner(ctx context.Context) (*runner, error) {
	cfg := r.cfg
	if cfg.BackgroundURL == "" || cfg.BackgroundURL == cfg.URL {
		if cfg.BackgroundModel == "" || cfg.BackgroundModel == r.model {
			return r, nil
		}
		b := *r // another model on the same server: its name in the requests
		b.model, b.cfg.Model = cfg.BackgroundModel, cfg.BackgroundModel
		return &b, nil
	}
	cfg.URL, cfg.Model = cfg.BackgroundURL, cfg.BackgroundModel
	b := &runner{cfg: cfg, c: newClient(cfg), model: cfg.Model, sizer: defaultSizer(), errs: r.errs}
	if err := b.prepare(ctx); err != nil {
		return nil, fmt.Errorf("%w (the background load's server, --background-url)", err)
	}
	return b, nil
}

// fimPhase sends FIM requests first..first+cfg.Requests-1 one at a time,
// as an editor does.
func (r *runner) fimPhase(ctx context.Context, ep endpoint, f *fimFile, first int) []outcome {
	r.startClock()
	var outs []outcome
	for i := first; i < first+r.cfg.Requests && r.mayStart(ctx); i++ {
		outs = append(outs, r.c.post(ctx, ep.request(r.model, f.measured(i, r.cfg))))
	}
	return outs
}

func p50(s *Summary) *float64 {
	if s == nil {
		return nil
	}
	return &s.P50
}

func p95(s *Summary) *float64 {
	if s == nil {
		return nil
	}
	return &s.P95
}

// fimFile is the source file FIM requests are made in: the lines before
// and after the cursor, and another file as repository context.
type fimFile struct {
	nonce          string
	prefix, suffix string
	extra          []fileChunk
	seed           uint64
}

// newFIMFile sizes a file to cfg.FIMPromptTokens: a quarter extra context,
// three fifths before the cursor, the rest after. A nonce heads it so no
// earlier run's cache (superfluid parks KV state across restarts) makes
// this run's requests warm.
func (r *runner) newFIMFile() *fimFile {
	t, s := r.cfg.FIMPromptTokens, r.sizer
	nonce := newNonce()
	before, after := s.lines(t*3/5), s.lines(t*3/20)
	lines := CodeLines(r.cfg.Seed, streamCode, 0, before+after)
	header := "# " + nonce + "\n"
	return &fimFile{
		nonce:  nonce,
		prefix: header + strings.Join(lines[:before], "\n") + "\n",
		suffix: "\n" + strings.Join(lines[before:], "\n") + "\n",
		extra:  []fileChunk{{Filename: "helpers.py", Text: header + strings.Join(CodeLines(r.cfg.Seed, streamExtra, 0, s.lines(t/4)), "\n") + "\n"}},
		seed:   r.cfg.Seed,
	}
}

// work is FIM request i: the file with its own unfinished cursor line.
func (f *fimFile) work(i, maxTokens int, stream bool) work {
	return work{fim: true, prompt: f.prefix, cursor: cursorLine(f.seed, uint64(i)), suffix: f.suffix, extra: f.extra, maxTokens: maxTokens, stream: stream}
}

// measured is the work of measured FIM request i.
func (f *fimFile) measured(i int, cfg Config) work {
	w := f.work(i, cfg.MaxTokens, cfg.FIMStream)
	w.ignoreEOS = cfg.FIMIgnoreEOS
	return w
}

func newNonce() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// load is the background requests: cfg.Concurrency workers, each sending
// long distinct prompts back to back until its context ends.
type load struct {
	ready chan struct{} // closed once every worker's first request is in
	wg    sync.WaitGroup
	mu    sync.Mutex
	outs  []outcome
}

func (r *runner) startLoad(ctx context.Context, ep endpoint, nonce string) *load {
	l := &load{ready: make(chan struct{})}
	var in sync.WaitGroup
	in.Add(r.cfg.Concurrency)
	for k := range r.cfg.Concurrency {
		l.wg.Go(func() { r.loadWorker(ctx, ep, nonce, k, l, in.Done) })
	}
	go func() { in.Wait(); close(l.ready) }()
	return l
}

// wait stops nothing; it waits for the workers (their context is what
// stops them) and returns their outcomes.
func (l *load) wait() []outcome {
	l.wg.Wait()
	return l.outs
}

// loadWorker sends background requests until ctx ends. Its first request
// counts as in once the server answered its headers, or Settle after it was
// sent (llama-server sends no headers until the prompt is prefilled, and
// the point is to measure during that prefill). Three failures in a row
// stop the worker rather than spin.
func (r *runner) loadWorker(ctx context.Context, ep endpoint, nonce string, k int, l *load, in func()) {
	var once sync.Once
	signal := func() { once.Do(in) }
	defer signal()
	words := r.sizer.words(r.cfg.PromptTokens)
	failures := 0
	for n := 0; ctx.Err() == nil; n++ {
		prompt := fmt.Sprintf("[%s %d.%d] %s", nonce, k, n, Prose(r.cfg.Seed, streamBackground, uint64(k)<<24|uint64(n), words))
		rq := ep.request(r.model, work{prompt: prompt, maxTokens: backgroundMaxTokens, stream: true, ignoreEOS: true, class: "background"})
		rq.onHeaders = signal
		rq.onSent = func() { time.AfterFunc(r.cfg.Settle, signal) }
		o := r.c.post(ctx, rq)
		signal()
		l.mu.Lock()
		l.outs = append(l.outs, o)
		l.mu.Unlock()
		if o.Err == nil || ctx.Err() != nil {
			failures = 0
			continue
		}
		if failures++; failures >= 3 {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
