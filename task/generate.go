package task

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"superfluid/engine"
	"superfluid/sched"
)

// Spec is one generation — one choice of a request — whatever API asked
// for it.
type Spec struct {
	Prompt    []engine.Token
	Class     sched.Class
	MaxTokens int
	Sampling  engine.Sampling
	// Logprobs: 0 none; n > 0 the sampled token's logprob and the top n-1
	// alternatives beside it (APIs ask for "logprobs" and "top_logprobs"
	// separately; the engine always ranks the sampled token among them).
	Logprobs int
	// TopLogprobs is how many alternatives the API reports per token
	// (Logprobs is at least 1 whenever logprobs are wanted at all).
	TopLogprobs int
	Stop        []string
	Deadline    time.Time
	Bias        []engine.LogitBias
	// StopTokens end generation like the model's end-of-generation tokens
	// (FIM markers, for instance); they are never rendered as text.
	StopTokens []engine.Token
	// Grammar constrains the output (structured output); GrammarField is
	// the request field it came from, named when the engine refuses it.
	Grammar      *engine.GrammarSpec
	GrammarField string
	// Show are special tokens rendered as text (a chat turn's reply
	// markers, which its reply parser reads); other special tokens are not.
	Show []engine.Token
	// Reply is how a chat turn's reply is read (FollowTurn); nil for a raw
	// completion, whose text is the answer.
	Reply *ReplyPlan
	// LoRA is the adapter scales the request named (Adapters.ForRequest);
	// nil: the model's global scales (Adapters.Resolve, at submission).
	LoRA []float32
	// Media is the prompt's images (NewMediaPrompt); Prompt is its
	// Prompt. Each submission holds a reference to it until its job ends.
	Media *MediaPrompt
}

// WithSeed is s for choice i of a request: each choice samples with its
// own seed so that n > 1 gives different answers.
func (s Spec) WithSeed(i int) Spec {
	s.Sampling.Seed += uint64(i)
	return s
}

// TokenOut is one generated token as the APIs report it.
type TokenOut struct {
	ID      engine.Token
	Piece   []byte // the token's own bytes (may be part of a character)
	Logprob float32
	Top     []engine.TopLogprob
}

// Delta is the text a step of generation makes visible, with the tokens
// behind it. Text is valid UTF-8; it may be empty while a character or a
// possible stop string is incomplete. A Delta and its slices are valid only
// during the emit call that receives it.
type Delta struct {
	Text   []byte
	Tokens []TokenOut
}

// Outcome is how a generation ended, in API-neutral terms.
type Outcome struct {
	Text      []byte // everything generated, when collected
	Finish    string // "stop" (EOG, a stop string, a complete grammar), "length", "cancelled", "error"
	StopWord  string // the stop string that ended it, if any
	Completed int    // tokens generated
	Result    sched.Result
}

// TokenHook, when set, runs on the goroutine following a generation for
// each token it reads (n counts them from 1), before the token is
// rendered. Tests panic in it, or hold a stream at a known point, through
// the real handlers; it is nil in service.
var TokenHook atomic.Pointer[func(s *Spec, n int)]

// Submit hands s to the scheduler. Handlers submit before they start a
// streamed response, so that a refusal still gets a proper status code.
func Submit(ctx context.Context, m *Model, s *Spec) (*sched.Stream, error) {
	if m.Sched == nil { // an embedding model; its routes refuse earlier
		return nil, WrongModelError("model %q is an embedding model: it does not generate text", m.Name)
	}
	st, err := m.Sched.Submit(ctx, sched.Request{
		Prompt: s.Prompt, Class: s.Class, Whole: takenWhole(ctx), MaxTokens: s.MaxTokens, Sampling: s.Sampling,
		Logprobs: s.Logprobs, Deadline: s.Deadline, Bias: s.Bias, StopTokens: s.StopTokens, Grammar: s.Grammar,
		LoRA: m.LoRA.Resolve(s.LoRA), Media: s.Media.spans(), MediaDone: s.Media.submitted(),
	})
	if err != nil && s.Media != nil {
		s.Media.Close() // the submission's reference
	}
	if errors.Is(err, engine.ErrGrammar) {
		return nil, GrammarError(s.GrammarField, err)
	}
	if err != nil {
		return nil, submitError(err)
	}
	return st, nil
}

// SubmitAll submits every spec before any is followed, so that a refusal
// (a full queue) comes back as the request's error — before a streamed
// response has started — and cancels the choices already submitted. It is
// the one "submit every choice, roll back on refusal" of every API.
func SubmitAll(ctx context.Context, m *Model, specs []*Spec) ([]*sched.Stream, error) {
	defer settleArrival(ctx) // the request's work is in the queue, or refused
	streams := make([]*sched.Stream, 0, len(specs))
	for _, s := range specs {
		st, err := Submit(ctx, m, s)
		if err != nil {
			for _, prev := range streams {
				prev.Cancel()
			}
			return nil, err
		}
		streams = append(streams, st)
	}
	return streams, nil
}

// Follow reads a submitted request's tokens and feeds emit with text as it
// becomes visible; emit may be nil to just collect. An error from emit (the
// client is gone) cancels the request. The error returned is an engine
// failure, ErrShutDown when the scheduler closed first (shutdown outlasted
// the drain), or ctx's error when the request was abandoned. The request
// is cancelled however Follow ends, a panic included, so its lane frees.
func Follow(ctx context.Context, m *Model, s *Spec, st *sched.Stream, collect bool, emit func(d *Delta) error) (Outcome, error) {
	defer st.Cancel() // a no-op once the request has ended
	var (
		out    Outcome
		text   engine.TextStream
		stops  = NewStopMatcher(s.Stop)
		d      Delta
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
		if h := TokenHook.Load(); h != nil {
			(*h)(s, out.Completed)
		}
		if schedulerClosed(st) {
			// The tokens still buffered are not rendered: the engine's
			// vocabulary may be freed once the scheduler has stopped.
			return out, ErrShutDown
		}
		d.Tokens = d.Tokens[:0]
		if !m.Desc.IsEOG(t.Token) && !slices.Contains(s.StopTokens, t.Token) {
			pieces = m.Text.AppendPiece(pieces[:0], t.Token, slices.Contains(s.Show, t.Token))
			raw = text.Push(raw[:0], pieces)
			d.Tokens = append(d.Tokens, TokenOut{ID: t.Token, Piece: pieces, Logprob: t.Logprob, Top: t.Top})
		} else {
			raw = raw[:0]
		}
		var hit string
		shown, hit = stops.Push(shown[:0], raw)
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
	tail := text.Flush(stops.Flush(shown[:0])) // held-back text came first
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
	out.Finish = FinishName(out.Result.Finish)
	if out.Result.Err != nil && out.Result.Finish == sched.FinishError {
		if errors.Is(out.Result.Err, sched.ErrClosed) {
			return out, ErrShutDown
		}
		return out, InternalError("generation failed: %v", out.Result.Err)
	}
	if out.Result.Err != nil && errors.Is(out.Result.Err, sched.ErrDeadline) {
		return out, errDeadline
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

// FinishName is a scheduler finish in API-neutral words.
func FinishName(f sched.Finish) string {
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

// submitError maps the scheduler's refusals onto typed errors.
func submitError(err error) error {
	if te, ok := AsError(err); ok { // already in the core's terms (an API key's refusal)
		return te
	}
	switch {
	case errors.Is(err, sched.ErrQueueFull):
		return errOverloaded
	case errors.Is(err, sched.ErrClosed):
		return ShuttingDown("the server is shutting down")
	}
	return BadRequest("%v", err)
}
