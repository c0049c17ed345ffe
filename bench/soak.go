package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// The soak scenario: cfg.Concurrency clients send the mix of soak_mix.go
// for cfg.Duration (at most cfg.Requests requests), while a watcher checks
// the server is alive and samples its memory; then it waits for the lanes
// to go idle. Its verdict is a list of problems, and the run meets its
// target only with none.

// SoakReport is what a soak found.
type SoakReport struct {
	Clients int `json:"clients"`
	Sent    int `json:"sent"`
	// ByEndpoint counts how requests ended, by route: HTTP statuses and
	// the kinds soakResult names.
	ByEndpoint map[string]map[string]int `json:"by_endpoint"`
	// ByClass counts how requests ended by QoS class: under saturation a
	// worse class waits longest, so a timeout's class tells overload from
	// a stall.
	ByClass    map[string]map[string]int `json:"by_class"`
	Poisons    map[string]map[string]int `json:"poisons"`
	Behaviours map[string]int            `json:"behaviours"`
	// Documented5xx is 503s (and overloaded/unavailable error events):
	// the server saying "not now" as it documents; Throttled is 429s with
	// Retry-After (inline completions past the FIM bucket).
	Documented5xx   int `json:"documented_5xx"`
	Throttled       int `json:"throttled"`
	Undocumented5xx int `json:"undocumented_5xx"`
	// UnexpectedRefusals is 4xx answers to well-formed requests.
	UnexpectedRefusals int `json:"unexpected_refusals"`
	// CrossSiteServed is requests a web page on another site could send
	// (a cross-site Origin, a rebound Host) answered with anything but 403.
	CrossSiteServed int `json:"cross_site_not_forbidden"`
	// Broken is answers cut or spoiled: truncated streams, error events,
	// malformed bodies, stalls past --timeout, dropped connections.
	Broken      int      `json:"broken"`
	ServerAlive bool     `json:"server_alive"`
	DownAfterS  *float64 `json:"down_after_s,omitempty"`
	DownReason  string   `json:"down_reason,omitempty"`
	// LanesIdle is whether every lane was idle and no request queued
	// within --idle-wait of the traffic stopping (absent: the server
	// does not say).
	LanesIdle  *bool      `json:"lanes_idle,omitempty"`
	LanesAfter string     `json:"lanes_after,omitempty"`
	RSS        *RSSReport `json:"rss"`
	// Goroutines is the server's goroutine count (go_goroutines on
	// /metrics) before the traffic and once it has settled after it.
	Goroutines *GoroutineReport `json:"goroutines,omitempty"`
	Skipped    []string         `json:"skipped_endpoints,omitempty"`
	// Repro is the first failed requests, to send again by hand.
	Repro    []SoakRepro `json:"repro,omitempty"`
	Problems []string    `json:"problems,omitempty"`
}

// SoakRepro is one failed request: where it went and what it sent.
type SoakRepro struct {
	Request  int    `json:"request"`
	Endpoint string `json:"endpoint"`
	Class    string `json:"class"`
	Poison   string `json:"poison,omitempty"`
	Behave   string `json:"behaviour"`
	Body     string `json:"body"` // Go-quoted when it is not valid UTF-8
	Outcome  string `json:"outcome"`
}

// Soak bounds and defaults.
const (
	defaultSoakDuration   = 10 * time.Minute
	defaultSoakTimeout    = 2 * time.Minute
	soakRequestsPerClient = 10000
	defaultIdleWait       = 30 * time.Second
	maxRepro              = 5
	maxReproBody          = 4 << 10
)

// soak runs the scenario into rep.
func (r *runner) soak(ctx context.Context, rep *Report) error {
	cfg := r.cfg
	sr := &SoakReport{Clients: cfg.Concurrency, ByEndpoint: map[string]map[string]int{}, ByClass: map[string]map[string]int{},
		Poisons: map[string]map[string]int{}, Behaviours: map[string]int{}, ServerAlive: true}
	rep.Soak, rep.Endpoint = sr, "all"
	mix, err := r.newSoakMix(ctx, func(q soakRequest, res soakResult) { r.record(sr, rep, q, res) })
	if err != nil {
		return err
	}
	for _, ep := range soakEndpoints {
		if !slices.Contains(mix.endpoints, ep) {
			sr.Skipped = append(sr.Skipped, ep.path)
		}
	}
	r.c.http.CloseIdleConnections() // the probes' connections: not counted as the server's own
	startGoroutines, goroutinesKnown := r.c.goroutines(ctx)
	slog.Info("bench: soak", "url", cfg.URL, "clients", cfg.Concurrency, "duration", cfg.Duration, "max_requests", cfg.Requests, "pid", cfg.PID)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	w := newWatcher(ctx, r.c, cfg.PID)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); w.run(watchCtx, rssPeriod(cfg.Duration), stop) }()

	started := time.Now()
	r.startClock()
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for r.mayStart(runCtx) {
				i := int(next.Add(1) - 1)
				if i >= cfg.Requests {
					return
				}
				q := mix.request(i)
				res := r.c.soakSend(runCtx, q)
				if res.kind == kindRefused { // nothing listens: the server is gone
					w.markDown(fmt.Errorf("server unreachable: %s", res.msg))
					stop()
				}
				mu.Lock()
				r.record(sr, rep, q, res)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if at, _ := w.down(); at.IsZero() && ctx.Err() == nil {
		if err := w.probe(ctx); err != nil { // a last sample and look, after the traffic
			w.markDown(err)
		}
	}
	stopWatch()
	<-watched
	if at, why := w.down(); !at.IsZero() {
		sr.ServerAlive, sr.DownAfterS, sr.DownReason = false, ptr(round3(at.Sub(started).Seconds())), why
	} else if ctx.Err() == nil {
		idle, state, known := r.c.awaitIdle(ctx, cfg.IdleWait)
		if known {
			sr.LanesIdle, sr.LanesAfter = ptr(idle), state
		}
	}
	sr.RSS = w.rss()
	r.c.http.CloseIdleConnections()
	if goroutinesKnown && sr.ServerAlive && ctx.Err() == nil {
		end := r.c.awaitGoroutines(ctx, startGoroutines, cfg.IdleWait)
		sr.Goroutines = &GoroutineReport{Start: startGoroutines, End: end, Back: end <= startGoroutines}
	}
	r.soakVerdict(rep, sr)
	return nil
}

// rssPeriod samples about 200 times a run, at most once a second.
func rssPeriod(d time.Duration) time.Duration { return max(time.Second, d/200) }

// record counts one request's end; a failure goes to the run's error log
// with where it went, and the first few to the report's repro list.
func (r *runner) record(sr *SoakReport, rep *Report, q soakRequest, res soakResult) {
	sr.Sent++
	add := func(m map[string]map[string]int, k string) {
		if m[k] == nil {
			m[k] = map[string]int{}
		}
		m[k][res.kind]++
	}
	add(sr.ByEndpoint, q.ep.path)
	if q.poison != "" {
		add(sr.Poisons, q.poison)
	}
	add(sr.ByClass, q.class)
	sr.Behaviours[q.behave.String()]++

	failed := true
	switch status := res.kind; {
	case mustBeForbidden(q.poison) && status != kindHungUp && status != kindStopped && status != kindRefused:
		failed = status != "403"
		if failed {
			sr.CrossSiteServed++
		}
	case res.documented && status == "429":
		sr.Throttled++
		failed = false
	case res.documented:
		sr.Documented5xx++
		failed = false
	case status == "200" || status == kindHungUp || status == kindStopped:
		failed = false
	case len(status) == 3 && status[0] == '5':
		sr.Undocumented5xx++
	case len(status) == 3 && status[0] == '4':
		failed = q.poison == "" // refusing a poison value is the right answer
		if failed {
			sr.UnexpectedRefusals++
		}
	case status == kindRefused:
		// the server is gone: a problem the watcher names once
	default:
		sr.Broken++
	}
	switch {
	case res.kind == kindHungUp || res.kind == kindStopped:
		rep.Requests.Cancelled++
	case failed:
		rep.Requests.Failed++
	default:
		rep.Requests.OK++
	}
	if !failed {
		return
	}
	what := q.ep.path
	if q.poison != "" {
		what += " (" + q.poison + ")"
	}
	outcome := res.kind
	if res.msg != "" {
		outcome += ": " + res.msg
	}
	r.errs.add(time.Now(), fmt.Errorf("POST %s: %s", what, outcome))
	if res.kind == kindRefused {
		return // sent to no one: nothing to re-send
	}
	body := string(q.body[:min(len(q.body), maxReproBody)])
	if !utf8.ValidString(body) {
		body = fmt.Sprintf("%q", body)
	}
	repro := SoakRepro{Request: q.id, Endpoint: q.ep.path, Class: q.class, Poison: q.poison, Behave: q.behave.String(), Body: body, Outcome: outcome}
	// A crash fails every request in flight; the poisoned ones are the
	// likelier culprits, so they take the place of plain ones.
	switch {
	case len(sr.Repro) < maxRepro:
		sr.Repro = append(sr.Repro, repro)
	case q.poison != "":
		if i := slices.IndexFunc(sr.Repro, func(x SoakRepro) bool { return x.Poison == "" }); i >= 0 {
			sr.Repro[i] = repro
		}
	}
}

// soakVerdict lists the problems and sets the report's key: met only with
// none.
func (r *runner) soakVerdict(rep *Report, sr *SoakReport) {
	var p []string
	if !sr.ServerAlive {
		p = append(p, fmt.Sprintf("the server went away %.1f s in: %s", *sr.DownAfterS, sr.DownReason))
	}
	if sr.Undocumented5xx > 0 {
		p = append(p, fmt.Sprintf("%d undocumented 5xx answers", sr.Undocumented5xx))
	}
	if sr.UnexpectedRefusals > 0 {
		p = append(p, fmt.Sprintf("%d well-formed requests refused", sr.UnexpectedRefusals))
	}
	if sr.CrossSiteServed > 0 {
		p = append(p, fmt.Sprintf("%d cross-site or rebound requests not answered 403", sr.CrossSiteServed))
	}
	if sr.Broken > 0 {
		p = append(p, fmt.Sprintf("%d answers cut or spoiled (truncated, error events, stalls, dropped connections)", sr.Broken))
	}
	if sr.LanesIdle != nil && !*sr.LanesIdle {
		p = append(p, fmt.Sprintf("lanes still busy %s after the traffic stopped: %s", r.cfg.IdleWait, sr.LanesAfter))
	}
	if f := sr.RSS.Flat; f != nil && !*f {
		p = append(p, fmt.Sprintf("resident memory grew %.0f%% after warm-up (%.1f → %.1f MiB)", sr.RSS.Growth*100, sr.RSS.BaselineMiB, sr.RSS.MaxLateMiB))
	}
	if g := sr.Goroutines; g != nil && !g.Back {
		p = append(p, fmt.Sprintf("goroutines not back to their starting count %s after the traffic: %d → %d", r.cfg.IdleWait, g.Start, g.End))
	}
	sr.Problems = p
	switch {
	case sr.ServerAlive && sr.LanesIdle == nil:
		r.notes = append(r.notes, "the server exposes neither superfluid_lanes_active nor /slots: lanes back to idle not checked")
	}
	switch {
	case sr.Goroutines == nil && sr.ServerAlive:
		r.notes = append(r.notes, "the server exports no go_goroutines gauge: goroutines back to their starting count not checked")
	}
	switch {
	case sr.RSS.Source == "":
		r.notes = append(r.notes, "resident memory not measured: pass --pid, or the server exports no "+rssGauge+" gauge")
	case sr.RSS.Flat == nil:
		r.notes = append(r.notes, fmt.Sprintf("resident memory: %d samples, too few for a verdict (run longer)", sr.RSS.Samples))
	}
	if len(sr.Skipped) > 0 {
		r.notes = append(r.notes, "endpoints the server does not serve, left out: "+strings.Join(sr.Skipped, ", "))
	}
	rep.Key = &Key{Name: "soak_problems", Value: float64(len(p)), Target: ptr(0.0), Better: "lower", Met: ptr(len(p) == 0)}
}

// newSoakMix learns what the mix needs of the server and keeps the
// endpoints it serves: each gets one small well-formed request (numbered
// -1, -2, … and recorded like the rest), and one answered 404, 405 or 501
// is left out.
func (r *runner) newSoakMix(ctx context.Context, record func(soakRequest, soakResult)) (*soakMix, error) {
	cfg := r.cfg
	nCtx, vocab := r.c.serverFacts(ctx, r.model)
	m := &soakMix{seed: cfg.Seed, model: r.model, sizer: r.sizer, maxTokens: cfg.MaxTokens, promptTokens: cfg.PromptTokens,
		longTokens: cfg.PromptTokens * 4, vocab: vocab}
	if nCtx > 0 {
		m.longTokens = min(m.longTokens, nCtx/2)
		m.promptTokens = min(m.promptTokens, nCtx/4)
	}
	probe := *m
	probe.maxTokens, probe.promptTokens = 1, 1
	for k, ep := range soakEndpoints {
		probe.endpoints = []soakEndpoint{ep}
		q := soakRequest{id: -1 - k, ep: ep, class: "chat", n: 1}
		if ep.path == "/infill" {
			q.class = "fim"
		}
		q.body = probe.body(newRand(cfg.Seed, streamSoak, 1<<32), q)
		res := r.c.soakSend(ctx, q)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if res.kind == kindRefused {
			return nil, fmt.Errorf("bench: soak: %s", res.msg)
		}
		if res.kind == "404" || res.kind == "405" || res.kind == "501" {
			slog.Info("bench: soak: endpoint not served, left out", "path", ep.path, "status", res.kind)
			continue
		}
		record(q, res)
		m.endpoints = append(m.endpoints, ep)
	}
	if len(m.endpoints) == 0 {
		return nil, fmt.Errorf("bench: soak: %s serves none of the endpoints", cfg.URL)
	}
	return m, nil
}
