package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
)

// MultiTurnReport breaks a multi-turn run down by turn. Turn 1 sends the
// long opening prompt cold; each later turn resends the conversation plus
// the reply and a short question, which a prefix cache serves warm.
type MultiTurnReport struct {
	Conversations int          `json:"conversations"`
	Turns         []TurnReport `json:"turns"`
	// WarmOverColdTTFT is the p50 TTFT of turns 2.. ÷ the p50 TTFT of turn 1.
	WarmOverColdTTFT *float64 `json:"warm_over_cold_ttft,omitempty"`
	ColdCachedShare  *float64 `json:"cold_cached_share,omitempty"`
	WarmCachedShare  *float64 `json:"warm_cached_share,omitempty"`
	// ColdBaselineTTFTMs is turn 1's p50 TTFT from an earlier run with the
	// same seed (--cold-report); RestartOverColdTTFT is this run's turn 1
	// (after a server restart) over it.
	ColdBaselineTTFTMs  *float64 `json:"cold_baseline_ttft_ms,omitempty"`
	RestartOverColdTTFT *float64 `json:"restart_over_cold_ttft,omitempty"`
}

// TurnReport is the n-th turn (from 1) of every conversation.
type TurnReport struct {
	Turn int `json:"turn"`
	Phase
}

// The design notes' targets: a warm turn ≤ 0.05× its cold prefill, a turn
// after a restart ≤ 0.1× cold.
const warmTarget, restartTarget = 0.05, 0.1

// multiTurn runs cfg.Requests conversations of cfg.Turns turns,
// cfg.Concurrency at a time, streaming every turn for its TTFT and asking
// for usage to read the cached prompt tokens.
func (r *runner) multiTurn(ctx context.Context, rep *Report) error {
	cfg := r.cfg
	ep, err := r.chatEndpoint(ctx, rep)
	if err != nil {
		return err
	}
	slog.Info("bench: multi-turn", "url", cfg.URL, "endpoint", ep.path, "conversations", cfg.Requests, "turns", cfg.Turns, "prompt_tokens", cfg.PromptTokens)
	r.startClock()
	convs := pool(ctx, r, cfg.Concurrency, cfg.Requests, func(ctx context.Context, c int) []outcome {
		return r.conversation(ctx, ep, c)
	})
	mt := &MultiTurnReport{Conversations: len(convs)}
	rep.MultiTurn = mt
	var all, cold, warm []outcome
	for t := range cfg.Turns {
		var turn []outcome
		for _, conv := range convs {
			if t < len(conv) {
				turn = append(turn, conv[t])
			}
		}
		if len(turn) == 0 {
			break
		}
		mt.Turns = append(mt.Turns, TurnReport{Turn: t + 1, Phase: tally(turn, ctx, nil)})
		all = append(all, turn...)
		if t == 0 {
			cold = turn
		} else {
			warm = append(warm, turn...)
		}
	}
	rep.Phase = tally(all, ctx, r.errs)
	coldP, warmP := tally(cold, ctx, nil), tally(warm, ctx, nil)
	mt.ColdCachedShare, mt.WarmCachedShare = coldP.CachedPromptShare, warmP.CachedPromptShare
	mt.WarmOverColdTTFT = ratio(p50(warmP.TTFTMs), p50(coldP.TTFTMs))
	r.multiTurnKey(rep, coldP)
	return nil
}

// multiTurnKey picks the headline: the restart ratio when a cold baseline
// was given, else the warm/cold ratio; and notes a turn 1 that was not cold.
func (r *runner) multiTurnKey(rep *Report, cold Phase) {
	mt := rep.MultiTurn
	if rep.CachedPromptShare == nil && rep.Requests.OK > 0 {
		r.notes = append(r.notes, "the server reported no cached prompt tokens (usage.prompt_tokens_details.cached_tokens or timings.cache_n)")
	}
	if r.cfg.ColdTTFT > 0 {
		mt.ColdBaselineTTFTMs = ptr(round3(ms(r.cfg.ColdTTFT)))
		mt.RestartOverColdTTFT = ratio(p50(cold.TTFTMs), mt.ColdBaselineTTFTMs)
		if mt.RestartOverColdTTFT != nil {
			rep.Key = newKey("turn1_ttft_after_restart_over_cold", *mt.RestartOverColdTTFT, restartTarget, "lower")
		}
		return
	}
	if mt.WarmOverColdTTFT != nil {
		rep.Key = newKey("warm_over_cold_ttft", *mt.WarmOverColdTTFT, warmTarget, "lower")
	}
	if s := mt.ColdCachedShare; s != nil && *s > 0.5 {
		r.notes = append(r.notes, fmt.Sprintf("turn 1 found %.0f%% of its prompt cached: the server has seen --seed %d before; pass another seed for a cold first turn", *s*100, r.cfg.Seed))
	}
}

// conversation runs conversation c: a long system prompt and a question,
// then each turn appends the reply and the next question.
func (r *runner) conversation(ctx context.Context, ep endpoint, c int) []outcome {
	cfg := r.cfg
	question := func(t int) message {
		return message{Role: "user", Content: Question(cfg.Seed, streamQuestion, uint64(c)<<16|uint64(t))}
	}
	msgs := []message{{Role: "system", Content: Prose(cfg.Seed, streamSystem, uint64(c), r.sizer.words(cfg.PromptTokens))}, question(0)}
	var outs []outcome
	for t := 0; t < cfg.Turns && r.mayStart(ctx); t++ {
		o := r.c.post(ctx, ep.request(r.model, work{messages: slices.Clone(msgs), maxTokens: cfg.MaxTokens, stream: true}))
		outs = append(outs, o)
		if o.Err != nil {
			break
		}
		msgs = append(msgs, message{Role: "assistant", Content: string(o.text)}, question(t+1))
	}
	return outs
}

// chatEndpoint is the chat route of the run's API the server answers,
// named in rep: the conversations of multi-turn and diverge go there.
func (r *runner) chatEndpoint(ctx context.Context, rep *Report) (endpoint, error) {
	eps := []endpoint{epChat}
	if r.cfg.API == Ollama {
		eps = []endpoint{epOllamaChat}
	}
	ep, err := r.resolve(ctx, eps, work{messages: []message{{Role: "user", Content: warmupPrompt}}, maxTokens: 1})
	if err != nil {
		return endpoint{}, err
	}
	rep.Endpoint = ep.path
	return ep, nil
}
