package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"superfluid/engine"
	"superfluid/sched"
)

// genSpec is one generation, whatever API asked for it.
type genSpec struct {
	Prompt    []engine.Token
	Class     sched.Class
	MaxTokens int
	Sampling  engine.Sampling
	// Logprobs: 0 none; n > 0 the sampled token's logprob and the top n-1
	// alternatives beside it (APIs ask for "logprobs" and "top_logprobs"
	// separately; the engine always ranks the sampled token among them).
	Logprobs int
	Stop     []string
	Deadline time.Time
	Bias     []engine.LogitBias
	// StopTokens end generation like the model's end-of-generation tokens
	// (FIM markers, for instance); they are never rendered as text.
	StopTokens []engine.Token
	// Grammar constrains the output (structured output); grammarField is
	// the request field it came from, named when the engine refuses it.
	Grammar      *engine.GrammarSpec
	grammarField string
	// turn is the chat turn this generation answers, nil for a raw
	// completion: its markers render as text, and followTurn parses it.
	turn *turnPlan
	// topLogprobs is how many alternatives the API reports per token
	// (Logprobs is at least 1 whenever logprobs are wanted at all).
	topLogprobs int
}

// tokenOut is one generated token as the APIs report it.
type tokenOut struct {
	ID      engine.Token
	Piece   []byte // the token's own bytes (may be part of a character)
	Logprob float32
	Top     []engine.TopLogprob
}

// delta is the text a step of generation makes visible, with the tokens
// behind it. Text is valid UTF-8; it may be empty while a character or a
// possible stop string is incomplete. A delta and its slices are valid only
// during the emit call that receives it.
type delta struct {
	Text   []byte
	Tokens []tokenOut
}

// outcome is how a generation ended, in API-neutral terms.
type outcome struct {
	Text      []byte // everything generated, when collected
	Finish    string // "stop" (EOG, a stop string, a complete grammar), "length", "cancelled", "error"
	StopWord  string // the stop string that ended it, if any
	Completed int    // tokens generated
	Result    sched.Result
}

// generate submits g and follows it to the end; see follow.
func generate(ctx context.Context, m *Model, g *genSpec, collect bool, emit func(d *delta) error) (outcome, error) {
	st, err := submit(ctx, m, g)
	if err != nil {
		return outcome{}, err
	}
	return follow(ctx, m, g, st, collect, emit)
}

// submit hands g to the scheduler. Handlers submit before they start a
// streamed response, so that a refusal still gets a proper status code.
func submit(ctx context.Context, m *Model, g *genSpec) (*sched.Stream, error) {
	if m.Sched == nil { // an embedding model; its routes refuse earlier (checkModelKind)
		return nil, badRequest("model %q is an embedding model: it does not generate text", m.Name)
	}
	st, err := m.Sched.Submit(ctx, sched.Request{
		Prompt: g.Prompt, Class: g.Class, MaxTokens: g.MaxTokens, Sampling: g.Sampling,
		Logprobs: g.Logprobs, Deadline: g.Deadline, Bias: g.Bias, StopTokens: g.StopTokens, Grammar: g.Grammar,
	})
	if errors.Is(err, engine.ErrGrammar) {
		return nil, grammarError(g.grammarField, err)
	}
	if err != nil {
		return nil, submitError(err)
	}
	return st, nil
}

// follow reads a submitted request's tokens and feeds emit with text as it
// becomes visible; emit may be nil to just collect. An error from emit (the
// client is gone) cancels the request. The error returned is an engine
// failure, errShutDown when the scheduler closed first (shutdown outlasted
// the drain), or ctx's error when the request was abandoned. The request
// is cancelled however follow ends, a panic included, so its lane frees.
func follow(ctx context.Context, m *Model, g *genSpec, st *sched.Stream, collect bool, emit func(d *delta) error) (outcome, error) {
	defer st.Cancel() // a no-op once the request has ended
	var (
		out    outcome
		text   engine.TextStream
		stops  = newStopMatcher(g.Stop)
		d      delta
		raw    []byte
		shown  []byte
		pieces []byte
	)
	for {
		t, err := st.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, err
		}
		out.Completed++
		if h := tokenHook.Load(); h != nil {
			(*h)(g, out.Completed)
		}
		if schedulerClosed(st) {
			// The tokens still buffered are not rendered: the engine's
			// vocabulary may be freed once the scheduler has stopped.
			return out, errShutDown
		}
		d.Tokens = d.Tokens[:0]
		if !m.Desc.IsEOG(t.Token) && !slices.Contains(g.StopTokens, t.Token) {
			special := g.turn != nil && slices.Contains(g.turn.show, t.Token)
			pieces = m.Text.AppendPiece(pieces[:0], t.Token, special)
			raw = text.Push(raw[:0], pieces)
			d.Tokens = append(d.Tokens, tokenOut{ID: t.Token, Piece: pieces, Logprob: t.Logprob, Top: t.Top})
		} else {
			raw = raw[:0]
		}
		var hit string
		shown, hit = stops.push(shown[:0], raw)
		if collect {
			out.Text = append(out.Text, shown...)
		}
		if emit != nil && (len(shown) > 0 || len(d.Tokens) > 0) {
			d.Text = shown
			if err := emit(&d); err != nil {
				return out, fmt.Errorf("http: client gone: %w", err)
			}
		}
		if hit != "" {
			out.StopWord = hit
			st.Cancel()
			<-st.Done()
			out.Finish = "stop"
			out.Result = st.Result()
			return out, nil
		}
	}
	tail := text.Flush(stops.flush(shown[:0])) // held-back text came first
	if len(tail) > 0 {
		if collect {
			out.Text = append(out.Text, tail...)
		}
		if emit != nil {
			d.Text, d.Tokens = tail, d.Tokens[:0]
			if err := emit(&d); err != nil {
				return out, fmt.Errorf("http: client gone: %w", err)
			}
		}
	}
	out.Result = st.Result()
	out.Finish = finishName(out.Result.Finish)
	if out.Result.Err != nil && out.Result.Finish == sched.FinishError {
		if errors.Is(out.Result.Err, sched.ErrClosed) {
			return out, errShutDown
		}
		return out, serverError("generation failed: %v", out.Result.Err)
	}
	if out.Result.Err != nil && errors.Is(out.Result.Err, sched.ErrDeadline) {
		return out, &apiError{Status: 408, Type: "timeout_error", Msg: "the request's deadline passed before it could start"}
	}
	return out, nil
}

// schedulerClosed reports whether st was ended by the scheduler shutting
// down. After that the engine may be closed at any moment (app closes it
// right after the scheduler), so nothing of the request may reach it.
func schedulerClosed(st *sched.Stream) bool {
	select {
	case <-st.Done():
		return errors.Is(st.Result().Err, sched.ErrClosed)
	default:
		return false
	}
}

func finishName(f sched.Finish) string {
	switch f {
	case sched.FinishEOG, sched.FinishStop, sched.FinishGrammar:
		// A complete grammar is the answer's natural end.
		return "stop"
	case sched.FinishLength, sched.FinishContext:
		return "length"
	case sched.FinishCancelled, sched.FinishDeadline:
		return "cancelled"
	}
	return "error"
}

// submitError maps the scheduler's refusals onto API errors.
func submitError(err error) error {
	switch {
	case errors.Is(err, sched.ErrQueueFull):
		return &apiError{Status: 503, Type: "overloaded_error", Msg: "too many requests are queued; try again shortly"}
	case errors.Is(err, sched.ErrClosed):
		return unavailable("the server is shutting down")
	}
	return badRequest("%v", err)
}
