package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The soak's watch on the server: is it still there, how much memory does
// it hold, and are its lanes idle once the traffic stops.

// rssSample is the server's resident memory at one moment.
type rssSample struct {
	at    time.Time
	bytes int64
}

// watcher probes the server while the soak runs.
type watcher struct {
	c      *client
	pid    int
	source string // where RSS comes from: /proc/PID/status, a /metrics gauge, or ""

	mu      sync.Mutex
	samples []rssSample
	downAt  time.Time // the first probe that found no server
	downMsg string
}

// rssGauge is the Prometheus process collector's resident-memory gauge,
// which a server may export on /metrics.
const rssGauge = "process_resident_memory_bytes"

func newWatcher(ctx context.Context, c *client, pid int) *watcher {
	w := &watcher{c: c, pid: pid}
	switch {
	case pid > 0:
		w.source = fmt.Sprintf("/proc/%d/status", pid)
	default:
		if m, err := c.metrics(ctx); err == nil {
			if _, ok := m[rssGauge]; ok {
				w.source = "/metrics " + rssGauge
			}
		}
	}
	return w
}

// run probes every period until ctx ends, and calls down (once) when the
// server is gone: its process exited, or nothing accepts connections.
func (w *watcher) run(ctx context.Context, period time.Duration, down func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := w.probe(ctx); err != nil {
			w.markDown(err)
			down()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// markDown records the first sign the server is gone.
func (w *watcher) markDown(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.downAt.IsZero() {
		w.downAt, w.downMsg = time.Now(), err.Error()
	}
}

// probe takes one RSS sample and checks the server answers /health. Only
// a refused connection or an exited process counts as gone: a server
// slow to answer under load is still there.
func (w *watcher) probe(ctx context.Context) error {
	if err := w.sample(ctx); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := w.c.get(pctx, "/health", nil)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil {
		return fmt.Errorf("server unreachable: %w", err)
	}
	return nil
}

// sample reads the server's RSS. An exited process is an error; a gauge
// that cannot be read this time is not.
func (w *watcher) sample(ctx context.Context) error {
	var n int64
	switch {
	case w.pid > 0:
		b, err := os.ReadFile(w.source)
		if err != nil {
			return fmt.Errorf("server process %d gone: %w", w.pid, err)
		}
		if n = vmRSS(string(b)); n <= 0 {
			return nil
		}
	case w.source != "":
		m, err := w.c.metrics(ctx)
		if err != nil || m[rssGauge] <= 0 {
			return nil
		}
		n = int64(m[rssGauge])
	default:
		return nil
	}
	w.mu.Lock()
	w.samples = append(w.samples, rssSample{at: time.Now(), bytes: n})
	w.mu.Unlock()
	return nil
}

// vmRSS reads VmRSS (in kB) from /proc/PID/status, in bytes; 0 if absent.
func vmRSS(status string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// down reports when the server was found gone and why (zero: it was not).
func (w *watcher) down() (time.Time, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.downAt, w.downMsg
}

// RSSReport is the server's resident memory over the run. The first
// quarter is warm-up (caches and pools fill); the baseline is the median
// of the second quarter, and memory is flat when no sample of the second
// half exceeds it by more than rssTolerance.
type RSSReport struct {
	Source      string  `json:"source"`
	Samples     int     `json:"samples"`
	BaselineMiB float64 `json:"baseline_mib,omitempty"`
	MaxLateMiB  float64 `json:"max_second_half_mib,omitempty"`
	LastMiB     float64 `json:"last_mib,omitempty"`
	Growth      float64 `json:"growth,omitempty"`
	Flat        *bool   `json:"flat_within_10pct,omitempty"`
}

const rssTolerance = 0.10

// minRSSSamples is the fewest samples a verdict on growth is drawn from.
const minRSSSamples = 8

func (w *watcher) rss() *RSSReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	rep := &RSSReport{Source: w.source, Samples: len(w.samples)}
	if w.source == "" {
		return rep
	}
	if len(w.samples) < minRSSSamples {
		return rep
	}
	start, span := w.samples[0].at, w.samples[len(w.samples)-1].at.Sub(w.samples[0].at)
	var second []float64
	var late []int64
	for _, s := range w.samples {
		switch f := float64(s.at.Sub(start)) / float64(span); {
		case f > 0.25 && f <= 0.5:
			second = append(second, float64(s.bytes))
		case f > 0.5:
			late = append(late, s.bytes)
		}
	}
	if len(second) == 0 || len(late) == 0 {
		return rep
	}
	slices.Sort(second)
	base := second[len(second)/2]
	peak := slices.Max(late)
	mib := func(b float64) float64 { return round3(b / (1 << 20)) }
	rep.BaselineMiB, rep.MaxLateMiB, rep.LastMiB = mib(base), mib(float64(peak)), mib(float64(w.samples[len(w.samples)-1].bytes))
	rep.Growth = round3(float64(peak)/base - 1)
	rep.Flat = ptr(rep.Growth <= rssTolerance)
	return rep
}

// lanesState is what the server says of its lanes: busy says whether any
// lane runs or any request waits, state shows the figures, known is false
// when the server exposes neither superfluid's gauges nor llama.cpp's /slots.
func (c *client) lanesState(ctx context.Context) (busy bool, state string, known bool) {
	if m, err := c.metrics(ctx); err == nil {
		if active, ok := m["superfluid_lanes_active"]; ok {
			parts := []string{fmt.Sprintf("superfluid_lanes_active=%g", active)}
			busy = active != 0
			for k, v := range m {
				if strings.HasPrefix(k, "superfluid_queue_depth{") && v != 0 {
					parts, busy = append(parts, fmt.Sprintf("%s=%g", k, v)), true
				}
			}
			slices.Sort(parts[1:])
			return busy, strings.Join(parts, " "), true
		}
	}
	var slots []struct {
		IsProcessing bool `json:"is_processing"`
	}
	if err := c.get(ctx, "/slots", &slots); err != nil || len(slots) == 0 {
		return false, "", false
	}
	n := 0
	for _, s := range slots {
		if s.IsProcessing {
			n++
		}
	}
	return n > 0, fmt.Sprintf("/slots: %d of %d processing", n, len(slots)), true
}

// awaitIdle polls the lanes until they are idle or bound passes; a lane
// still busy then holds work no client is waiting for.
func (c *client) awaitIdle(ctx context.Context, bound time.Duration) (idle bool, state string, known bool) {
	deadline := time.Now().Add(bound)
	for {
		busy, state, known := c.lanesState(ctx)
		if !known || !busy || time.Now().After(deadline) || ctx.Err() != nil {
			return !busy, state, known
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// metrics reads a Prometheus text page into "name{labels}" → value.
func (c *client) metrics(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.describe(err, 10*time.Second)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, readHTTPError(resp)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); i > 0 && err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// serverFacts reads what the mix needs to know of the server: its
// context size (llama.cpp's /props) and vocabulary size (llama-server's
// /v1/models meta, else Ollama's verbose /api/show). 0: unknown.
func (c *client) serverFacts(ctx context.Context, model string) (nCtx, vocab int) {
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if c.get(ctx, "/props", &props) == nil {
		nCtx = props.Settings.NCtx
	}
	var models struct {
		Data []struct {
			Meta struct {
				NVocab int `json:"n_vocab"`
			} `json:"meta"`
		} `json:"data"`
	}
	if c.get(ctx, "/v1/models", &models) == nil && len(models.Data) > 0 && models.Data[0].Meta.NVocab > 0 {
		return nCtx, models.Data[0].Meta.NVocab
	}
	var show struct {
		Info map[string]json.RawMessage `json:"model_info"`
	}
	if c.postJSON(ctx, "/api/show", map[string]any{"model": model, "verbose": true}, &show) == nil {
		var tokens []json.RawMessage
		if json.Unmarshal(show.Info["tokenizer.ggml.tokens"], &tokens) == nil {
			vocab = len(tokens)
		}
	}
	return nCtx, vocab
}

// GoroutineReport is the server's goroutine count before and after a soak.
type GoroutineReport struct {
	Start int  `json:"start"`
	End   int  `json:"end"`
	Back  bool `json:"back_to_start"`
}

// goroutineGauge is the Go collector's goroutine count.
const goroutineGauge = "go_goroutines"

// goroutines reads the server's goroutine count; known is false when it
// exports none.
func (c *client) goroutines(ctx context.Context) (n int, known bool) {
	m, err := c.metrics(ctx)
	if err != nil {
		return 0, false
	}
	v, ok := m[goroutineGauge]
	return int(v), ok
}

// awaitGoroutines polls the server's goroutine count until it is back to
// start or bound passes (idle connections and worker pools wind down a
// few seconds after the traffic); it returns the last count.
func (c *client) awaitGoroutines(ctx context.Context, start int, bound time.Duration) int {
	deadline := time.Now().Add(bound)
	for {
		n, known := c.goroutines(ctx)
		c.http.CloseIdleConnections() // our own scrape's connection is not the server's leak
		if !known || n <= start || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
