package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// runner carries one run's shared state.
type runner struct {
	cfg      Config
	c        *client
	model    string
	sizer    sizer
	deadline time.Time // no new work after it (zero: none)
	errs     *errorLog
	notes    []string
}

// Run runs cfg's scenario and returns its report. Cancelling ctx (Ctrl-C)
// stops the run and returns what was measured, marked interrupted; an
// error means nothing could be measured (bad flags, unreachable server, a
// warm-up request the server refused).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, c: newClient(cfg), model: cfg.Model, sizer: defaultSizer(), errs: newErrorLog()}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	rep := r.newReport()
	var err error
	switch cfg.Scenario {
	case Decode:
		err = r.decode(ctx, rep)
	case FIMUnderLoad:
		err = r.fimUnderLoad(ctx, rep)
	case MultiTurn:
		err = r.multiTurn(ctx, rep)
	case Diverge:
		err = r.diverge(ctx, rep)
	case Soak:
		err = r.soak(ctx, rep)
	}
	rep.ElapsedS = round3(time.Since(rep.Started).Seconds())
	rep.Interrupted = ctx.Err() != nil
	r.judgeFailures(rep)
	rep.Errors, rep.Notes = r.errs.list(), r.notes
	if err != nil && !rep.Interrupted {
		return nil, err
	}
	return rep, nil
}

// judgeFailures puts the run's failures in the report. The figures leave
// failed requests out, so a run with any cannot have met its target,
// however good the figures of the rest look.
func (r *runner) judgeFailures(rep *Report) {
	rep.Failures = r.errs.failures()
	if rep.Failures == nil {
		return
	}
	if k := rep.Key; k != nil && k.Met != nil {
		k.Met = ptr(false)
	}
	r.notes = append(r.notes, fmt.Sprintf("%d requests failed (first: %s): the figures leave them out, so no target is met", rep.Failures.Count, rep.Failures.FirstError))
}

func (r *runner) newReport() *Report {
	c := r.cfg
	s := Settings{Concurrency: c.Concurrency, Requests: c.Requests, MaxTokens: c.MaxTokens, PromptTokens: c.PromptTokens,
		DurationS: c.Duration.Seconds(), TimeoutS: c.Timeout.Seconds(), Seed: c.Seed, Prompt: r.sizer}
	switch c.Scenario {
	case FIMUnderLoad:
		s.FIMPromptTokens = c.FIMPromptTokens
	case MultiTurn:
		s.Turns = c.Turns
	}
	return &Report{Scenario: c.Scenario, URL: c.URL, API: c.API, Model: r.model, Settings: s, Started: time.Now().UTC().Round(time.Millisecond)}
}

// prepare waits for the server to be ready, picks the model when none was
// named, and calibrates prompt sizes against the server's tokenizer.
func (r *runner) prepare(ctx context.Context) error {
	if err := r.waitReady(ctx); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if r.model == "" {
		if err := r.discoverModel(ctx); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	r.calibrate(ctx)
	return nil
}

// waitReady polls /health while it answers 503 (superfluid and llama-server
// while the model loads). Any other answer, 404 included (Ollama), means
// ready; no answer at all means the URL is wrong.
func (r *runner) waitReady(ctx context.Context) error {
	const poll = 500 * time.Millisecond
	wait := min(r.cfg.Timeout, 5*time.Minute)
	limit := time.Now().Add(wait)
	logged := false
	for {
		err := r.c.get(ctx, "/health", nil)
		var he *httpError
		if err == nil || !errors.As(err, &he) {
			return err
		}
		if he.Code != http.StatusServiceUnavailable {
			return nil
		}
		if time.Now().After(limit) {
			return fmt.Errorf("%s/health still answers 503 (loading) after %s", r.cfg.URL, wait)
		}
		if !logged {
			slog.Info("bench: waiting for the server to load its model", "url", r.cfg.URL)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// discoverModel names the server's first model: llama-server and superfluid
// serve one and ignore the name; Ollama needs one.
func (r *runner) discoverModel(ctx context.Context) error {
	if r.cfg.API == Ollama {
		var tags struct {
			Models []struct {
				Name string `json:"name"`
			} `json:"models"`
		}
		if err := r.c.get(ctx, "/api/tags", &tags); err != nil {
			return fmt.Errorf("listing models (/api/tags): %w", err)
		}
		if len(tags.Models) == 0 {
			return errors.New("the server lists no models; pull one or pass --model")
		}
		r.model = tags.Models[0].Name
		return nil
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := r.c.get(ctx, "/v1/models", &list); err == nil && len(list.Data) > 0 {
		r.model = list.Data[0].ID
	}
	return nil
}

// calibrate measures tokens per word and per code line with the server's
// tokenizer, so every server with the same tokenizer gets prompts of the
// same size and text. It keeps the estimates when the server cannot say.
func (r *runner) calibrate(ctx context.Context) {
	words, lines := r.countTokens(ctx, calibrationProse()), r.countTokens(ctx, calibrationCode())
	if words > 0 && lines > 0 {
		r.sizer = sizer{TokensPerWord: round3(float64(words) / calibrationWords), TokensPerLine: round3(float64(lines) / calibrationLines), Calibrated: true}
	}
}

// countTokens asks llama.cpp's /tokenize, else generates one token from the
// text as a raw completion and reads the prompt tokens it reports (Ollama
// has no /tokenize). A nonce heads the generated one so no cache from an
// earlier run shortens the count. 0: unknown.
func (r *runner) countTokens(ctx context.Context, text string) int {
	if r.cfg.API == OpenAI {
		var out struct {
			Tokens []any `json:"tokens"`
		}
		if r.c.postJSON(ctx, "/tokenize", map[string]any{"content": text}, &out) == nil && len(out.Tokens) > 0 {
			return len(out.Tokens)
		}
	}
	ep := epCompletions
	if r.cfg.API == Ollama {
		ep = epGenerate
	}
	nonce := newNonce() + "\n"
	o := r.c.post(ctx, ep.request(r.model, work{prompt: nonce + text, maxTokens: 1}))
	base := r.c.post(ctx, ep.request(r.model, work{prompt: nonce, maxTokens: 1}))
	if o.Err != nil || base.Err != nil || o.prompt <= base.prompt {
		return 0
	}
	return o.prompt - base.prompt
}

// resolve returns the first of candidates the server serves, found by
// sending each the warm-up work: a 404, 405 or 501 moves on to the next.
// The warm-up also keeps one-time costs (Ollama loading the model, the
// first batch's allocations) out of the measured requests.
func (r *runner) resolve(ctx context.Context, candidates []endpoint, warm work) (endpoint, error) {
	var first error
	for _, ep := range candidates {
		w := warm
		if ep.proto != protoInfill {
			w.maxTokens = max(w.maxTokens, 1) // n_predict 0 is llama.cpp's warm-up; others want 1
		}
		o := r.c.post(ctx, ep.request(r.model, w))
		if dropped(o.Err) && ctx.Err() == nil {
			// A keep-alive connection the server closed as it was reused
			// (llama-server's idle timeout); a warm-up is safe to resend.
			o = r.c.post(ctx, ep.request(r.model, w))
		}
		if o.Err == nil {
			return ep, nil
		}
		err := fmt.Errorf("bench: warm-up request to %s%s: %w", r.cfg.URL, ep.path, o.Err)
		if !missing(o.Err) || ctx.Err() != nil {
			return ep, err
		}
		if first == nil {
			first = err // the preferred endpoint's answer says most (a 404 may be an unknown model)
		}
		slog.Debug("bench: endpoint missing, trying the next", "path", ep.path, "err", o.Err)
	}
	return endpoint{}, first
}

// dropped reports whether err is a connection closed before any answer.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// completionEndpoints are where plain completion work goes: /v1/completions,
// else /v1/chat/completions (the prompt as a user message).
func (r *runner) completionEndpoints() []endpoint {
	if r.cfg.API == Ollama {
		return []endpoint{epGenerate}
	}
	return []endpoint{epCompletions, epChat}
}

// startClock starts the --duration bound.
func (r *runner) startClock() {
	if r.cfg.Duration > 0 {
		r.deadline = time.Now().Add(r.cfg.Duration)
	}
}

// mayStart reports whether new work may begin.
func (r *runner) mayStart(ctx context.Context) bool {
	return ctx.Err() == nil && (r.deadline.IsZero() || time.Now().Before(r.deadline))
}

// pool runs fn for items 0..n-1 on workers goroutines, starting no item
// once the run is stopped or past its duration, and returns the results of
// the items that ran, in item order.
func pool[T any](ctx context.Context, r *runner, workers, n int, fn func(context.Context, int) T) []T {
	outs := make([]T, n)
	ran := make([]bool, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r.mayStart(ctx) {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				outs[i], ran[i] = fn(ctx, i), true
			}
		})
	}
	wg.Wait()
	kept := outs[:0]
	for i := range outs {
		if ran[i] {
			kept = append(kept, outs[i])
		}
	}
	return kept
}
