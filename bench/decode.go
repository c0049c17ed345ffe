package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// warmupPrompt is short and unlike any measured prompt, so warming up never
// puts a measured prompt in the server's cache.
const warmupPrompt = "Say hello."

// decode runs cfg.Requests long greedy generations of one fixed prompt,
// cfg.Concurrency at a time, and reports decode tokens/s per stream and in
// aggregate, and TTFT.
func (r *runner) decode(ctx context.Context, rep *Report) error {
	cfg := r.cfg
	prompt := Prose(cfg.Seed, streamDecode, 0, r.sizer.words(cfg.PromptTokens))
	ep, err := r.resolve(ctx, r.completionEndpoints(), work{prompt: warmupPrompt, maxTokens: 1})
	if err != nil {
		return err
	}
	rep.Endpoint = ep.path
	slog.Info("bench: decode", "url", cfg.URL, "endpoint", ep.path, "streams", cfg.Concurrency, "requests", cfg.Requests, "max_tokens", cfg.MaxTokens)
	w := work{prompt: prompt, maxTokens: cfg.MaxTokens, stream: true, ignoreEOS: true}
	r.startClock()
	outs := pool(ctx, r, cfg.Concurrency, cfg.Requests, func(ctx context.Context, _ int) outcome {
		return r.c.post(ctx, ep.request(r.model, w))
	})
	rep.Phase = tally(outs, ctx, r.errs)
	var rates []float64
	for i := range outs {
		if rate, ok := outs[i].decodeRate(); ok && outs[i].Err == nil {
			rates = append(rates, rate)
		}
	}
	rep.StreamTokensPerS = Summarize(rates)
	if short := shortGenerations(outs, cfg.MaxTokens); short > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%d generations ended before --max-tokens %d (end of generation: the server ignored ignore_eos)", short, cfg.MaxTokens))
	}
	if agg, ok := aggregateRate(outs); ok {
		rep.TokensPerS = ptr(round3(agg))
		if cfg.ReferenceTPS > 0 {
			rep.Key = newKey("decode_vs_engine", agg/cfg.ReferenceTPS, 0.97, "higher")
		} else {
			rep.Key = newKey("decode_tokens_per_s", agg, 0, "higher")
		}
	}
	return nil
}

// shortGenerations counts successful generations shorter than asked.
func shortGenerations(outs []outcome, maxTokens int) int {
	n := 0
	for i := range outs {
		if outs[i].Err == nil && outs[i].tokens() < maxTokens {
			n++
		}
	}
	return n
}

// aggregateRate is every successful stream's tokens after its first ÷ the
// span from the earliest first token to the latest last token: what the
// server sustains across streams, prefills between them included.
func aggregateRate(outs []outcome) (float64, bool) {
	var from, to time.Time
	tokens := 0
	for i := range outs {
		o := &outs[i]
		if o.Err != nil || o.first.IsZero() || o.tokens() < 2 {
			continue
		}
		tokens += o.tokens() - 1
		if from.IsZero() || o.first.Before(from) {
			from = o.first
		}
		if o.last.After(to) {
			to = o.last
		}
	}
	if tokens == 0 || !to.After(from) {
		return 0, false
	}
	return float64(tokens) / to.Sub(from).Seconds(), true
}
