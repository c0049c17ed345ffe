package sched

import (
	"fmt"
	"math"
	"time"

	"superfluid/engine"
)

// Request is one generation to schedule.
type Request struct {
	// Prompt is the tokens to continue; at least one. Submit copies it.
	Prompt []engine.Token
	// Class is who waits on the reply; see Class.
	Class Class
	// Whole: the client takes the reply whole (a response that is not
	// streamed, a batch job), so nobody reads its tokens as they come: its
	// lane has no inter-token deadline and its first token gates nothing
	// a person sees; only when the whole reply ends does. The planner then
	// prefills its neighbours beside it in full steps (watched, plan.go).
	// Zero, the default, is a reply read as it streams.
	Whole bool
	// MaxTokens bounds the tokens generated; 0: until end of generation, a
	// stop token or a full context.
	MaxTokens int
	// Sampling parameters; the zero value means engine.Greedy().
	Sampling engine.Sampling
	// Logprobs asks for the top-N logprobs of each token (0–20).
	Logprobs int
	// Bias is added to token logits before sampling. Submit copies it.
	Bias []engine.LogitBias
	// StopTokens end generation like an end-of-generation token does (the
	// engine only knows the model's own). The stop token is delivered, with
	// the final Result saying FinishStop, so a caller can hide it.
	StopTokens []engine.Token
	// Deadline, when set, is when the request stops being worth running: a
	// request still queued then never starts (its Result carries
	// ErrDeadline), and a running one stops within a step (FinishDeadline).
	Deadline time.Time
	// Grammar, when set, constrains the output; a grammar that does not
	// parse makes Submit fail with an error that satisfies
	// errors.Is(err, engine.ErrGrammar). A lane whose grammar completes
	// ends with FinishGrammar.
	Grammar *engine.GrammarSpec
	// LoRA is the request's adapter scales, one per adapter the engine
	// loaded (engine.Descriptor.LoRA); nil or all zero: no adapter. Submit
	// copies it. See lora.go for how lanes of different sets share steps.
	LoRA []float32
	// Media are the prompt's images: spans of embedding rows at positions
	// whose Prompt tokens are placeholders (any token; media.go). Submit
	// refuses them when the engine prefills no rows.
	Media []MediaSpan
	// MediaDone, when set, runs once the job has ended (on the runner's
	// goroutine, after any Encode): the owner frees the images' native
	// state there. A refused Submit does not call it.
	MediaDone func()
}

// validate refuses what the engine would refuse at admission. The engine
// would fail only the request's own lane, but after a tick planned around
// it had been refused and planned again: such a request must never reach
// a plan.
func (r *Request) validate(d *engine.Descriptor) error {
	if len(r.Prompt) == 0 {
		return fmt.Errorf("sched: empty prompt")
	}
	if len(r.Prompt) >= d.Ctx {
		return fmt.Errorf("sched: prompt of %d tokens leaves no room in a context of %d", len(r.Prompt), d.Ctx)
	}
	if int(r.Class) >= NumClasses {
		return fmt.Errorf("sched: unknown class %d", r.Class)
	}
	if r.MaxTokens < 0 || int64(r.MaxTokens) > math.MaxUint32 {
		return fmt.Errorf("sched: max tokens %d out of range", r.MaxTokens)
	}
	if r.Logprobs < 0 || r.Logprobs > engine.MaxLogprobs {
		return fmt.Errorf("sched: logprobs %d outside [0, %d]", r.Logprobs, engine.MaxLogprobs)
	}
	if err := r.validateMedia(); err != nil {
		return err
	}
	for i, t := range r.Prompt {
		if inSpan(r.Media, i) {
			continue
		}
		if t < 0 || (d.Vocab > 0 && int(t) >= d.Vocab) {
			return fmt.Errorf("sched: prompt token %d at %d outside the vocabulary of %d", t, i, d.Vocab)
		}
	}
	for _, b := range r.Bias {
		if b.Token < 0 || (d.Vocab > 0 && int(b.Token) >= d.Vocab) || math.IsNaN(float64(b.Bias)) {
			return fmt.Errorf("sched: logit bias for token %d is invalid", b.Token)
		}
	}
	if err := engine.CheckLoRAScales(r.LoRA, d.LoRA); err != nil {
		return fmt.Errorf("sched: %w", err)
	}
	if engine.BansEveryToken(r.Bias, d.Vocab) {
		return fmt.Errorf("sched: the logit bias bans every token of the vocabulary")
	}
	if r.Sampling == (engine.Sampling{}) {
		return nil // greedy
	}
	return validSampling(&r.Sampling)
}

// maxPenalty bounds the frequency and presence penalties, as the engine
// does (native SF_MAX_PENALTY): beyond it the logits overflow.
const maxPenalty = 1e6

// validSampling mirrors the engine's range checks on sampling parameters
// (native sampling_refusal), refusing a NaN temperature the engine would
// take as greedy.
func validSampling(s *engine.Sampling) error {
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	penalty := func(f float32) bool { return finite(f) && math.Abs(float64(f)) <= maxPenalty }
	if !finite(s.Temperature) || !finite(s.TopP) || !finite(s.MinP) || !finite(s.RepeatPenalty) ||
		!penalty(s.FrequencyPenalty) || !penalty(s.PresencePenalty) || s.TopK < 0 || s.TopP <= 0 || s.TopP > 1 ||
		s.MinP < 0 || s.MinP > 1 || s.RepeatPenalty <= 0 || s.PenaltyLastN < -1 {
		return fmt.Errorf("sched: sampling parameters out of range: %+v", *s)
	}
	return nil
}
