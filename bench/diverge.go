package bench

import (
	"context"
	"log/slog"
	"strings"
)

// The diverge scenario: what an edited conversation costs. Each
// conversation sends a long opening prompt cold, then the same
// conversation with its opening edited after a share of its words (an
// earlier message changed, a cursor moved up a file), then the original
// conversation's second turn. A server that reuses what it can serves the
// edited prompt from the cache up to the edit, and the second turn from
// the cache whole — on every model family, whatever its attention.

// DivergeReport is the three requests of each conversation, by kind.
type DivergeReport struct {
	Conversations int `json:"conversations"`
	// KeptShare is the share of the opening's words kept before the edit.
	KeptShare float64 `json:"kept_share"`
	Cold      Phase   `json:"cold"`
	Diverged  Phase   `json:"diverged"`
	Second    Phase   `json:"second_turn"`
	// DivergedOverColdTTFT and SecondOverColdTTFT are p50 TTFT ratios.
	DivergedOverColdTTFT *float64 `json:"diverged_over_cold_ttft,omitempty"`
	SecondOverColdTTFT   *float64 `json:"second_over_cold_ttft,omitempty"`
}

// divergeKept is the share of the opening a diverging request keeps: the
// engine-default issue's 85%.
const divergeKept = 0.85

// diverge runs cfg.Requests conversations, one at a time so that every
// request finds the cache as the conversation left it.
func (r *runner) diverge(ctx context.Context, rep *Report) error {
	cfg := r.cfg
	ep, err := r.chatEndpoint(ctx, rep)
	if err != nil {
		return err
	}
	slog.Info("bench: diverge", "url", cfg.URL, "endpoint", ep.path, "conversations", cfg.Requests, "prompt_tokens", cfg.PromptTokens, "kept", divergeKept)
	r.startClock()
	var cold, diverged, second []outcome
	for c := 0; c < cfg.Requests && r.mayStart(ctx); c++ {
		byKind := []*[]outcome{&cold, &diverged, &second}
		for i, o := range r.divergingConversation(ctx, ep, c) {
			*byKind[i] = append(*byKind[i], o)
		}
	}
	d := &DivergeReport{Conversations: len(cold), KeptShare: divergeKept,
		Cold: tally(cold, ctx, nil), Diverged: tally(diverged, ctx, nil), Second: tally(second, ctx, nil)}
	rep.Diverge = d
	rep.Phase = tally(append(append(append([]outcome(nil), cold...), diverged...), second...), ctx, r.errs)
	d.DivergedOverColdTTFT = ratio(p50(d.Diverged.TTFTMs), p50(d.Cold.TTFTMs))
	d.SecondOverColdTTFT = ratio(p50(d.Second.TTFTMs), p50(d.Cold.TTFTMs))
	if s := d.Diverged.CachedPromptShare; s != nil {
		// All that comes before the edit can be reused: the target is the
		// kept share less the template's few tokens around it.
		rep.Key = newKey("diverged_cached_share", *s, divergeKept*0.9, "higher")
	} else {
		r.notes = append(r.notes, "the server reported no cached prompt tokens (usage.prompt_tokens_details.cached_tokens or timings.cache_n)")
	}
	return nil
}

// divergingConversation sends conversation c's cold opening, its edited
// copy and its second turn; it stops at the first failure.
func (r *runner) divergingConversation(ctx context.Context, ep endpoint, c int) []outcome {
	cfg := r.cfg
	words := strings.Fields(Prose(cfg.Seed, streamSystem, uint64(c), r.sizer.words(cfg.PromptTokens)))
	opening := strings.Join(words, " ")
	kept := int(float64(len(words)) * divergeKept)
	edited := strings.Join(words[:kept], " ") + " " + Prose(cfg.Seed, streamQuestion, uint64(c)<<16|0xed17, len(words)-kept)
	ask := message{Role: "user", Content: Question(cfg.Seed, streamQuestion, uint64(c)<<16)}
	send := func(msgs []message) outcome {
		return r.c.post(ctx, ep.request(r.model, work{messages: msgs, maxTokens: cfg.MaxTokens, stream: true}))
	}
	first := send([]message{{Role: "system", Content: opening}, ask})
	if first.Err != nil {
		return []outcome{first}
	}
	div := send([]message{{Role: "system", Content: edited}, ask})
	if div.Err != nil {
		return []outcome{first, div}
	}
	again := message{Role: "user", Content: Question(cfg.Seed, streamQuestion, uint64(c)<<16|1)}
	return []outcome{first, div, send([]message{{Role: "system", Content: opening}, ask, {Role: "assistant", Content: string(first.text)}, again})}
}
