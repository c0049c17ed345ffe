package engine

import "math"

// Token is a vocabulary id.
type Token = int32

// Sampling holds one lane's sampling parameters. Temperature <= 0 is greedy.
type Sampling struct {
	Temperature      float32
	TopK             int32   // 0: off
	TopP             float32 // 1: off
	MinP             float32 // 0: off
	RepeatPenalty    float32 // 1: off
	FrequencyPenalty float32
	PresencePenalty  float32
	PenaltyLastN     int32 // tokens the penalties look back over; -1: whole context
	Seed             uint64
}

// MinTemperature is the lowest temperature that samples: below it the
// logits divided by the temperature overflow to ±inf (a denormal such as
// 1e-40 does), so a lower one is greedy, as llama-server treats it.
const MinTemperature = 1e-5

// Normalize turns values the engine cannot sample with into what they
// mean: a temperature below MinTemperature is greedy.
func (s *Sampling) Normalize() {
	if !(s.Temperature >= MinTemperature) {
		s.Temperature = 0
	}
}

// Greedy returns sampling that always picks the most likely token.
func Greedy() Sampling {
	return Sampling{TopP: 1, RepeatPenalty: 1, PenaltyLastN: 64}
}

// LogitBias adds Bias to a token's logit before sampling.
type LogitBias struct {
	Token Token
	Bias  float32
}

// Admit binds a lane to an engine sequence with a prompt. The first Cached
// prompt tokens must already be in the sequence; prefills cover the rest.
type Admit struct {
	Lane      uint32
	Seq       int32
	PromptOff uint32 // into Plan.Tokens
	PromptLen uint32
	Cached    uint32
	MaxTokens uint32 // 0: until end of generation or a full context
	BiasOff   uint32 // into Plan.Biases
	BiasLen   uint32
	Logprobs  int32 // top-N logprobs per token, 0..MaxLogprobs
	Flags     uint32
	// Grammar constrains the lane's output; 0: none (see Grammars).
	Grammar GrammarID
	// GrammarReplay: the prompt's last GrammarReplay tokens are the lane's
	// own reply so far (a preempted lane resuming), walked by the grammar
	// before it samples; the engine refuses a reply the grammar would not
	// have allowed (ErrGrammar).
	GrammarReplay uint32
	Sampling      Sampling
}

// MaxLogprobs is the most top-N logprobs a lane may ask for.
const MaxLogprobs = 20

// Prefill feeds Count prompt tokens of a lane starting at Offset.
type Prefill struct {
	Lane   uint32
	Offset uint32
	Count  uint32
}

// Decode feeds a prefilled lane's last sampled token and samples its next:
// one token of the lane's reply in this step. With a draft (DraftLen
// tokens at Plan.Tokens[DraftOff:]), a guess at what the reply continues
// with, the step also feeds the draft and samples each of its rows in
// order while the token sampled is the draft token fed after it: the lane
// commits the drafts so accepted and one token of the model's own — the
// same tokens it would give without the draft, several in one step — and
// the engine drops the rejected rows from the sequence. Set with AddDraft.
type Decode struct {
	Lane     uint32
	DraftOff uint32
	DraftLen uint32
	// SynthAccept (benchmarking only, as llama-server's --spec-synth-*):
	// the first SynthAccept draft tokens are committed whatever the model
	// makes of them, then the row after them is sampled and ends the
	// lane's step. The output is not the model's. Refused on a grammar
	// lane and beyond DraftLen.
	SynthAccept uint32
}

// AddDraft appends a decode of lane carrying draft (copied into the
// plan's tokens); an empty draft is a plain decode.
func (p *Plan) AddDraft(lane uint32, draft []Token) {
	d := Decode{Lane: lane}
	if len(draft) > 0 {
		d.DraftOff, d.DraftLen = uint32(len(p.Tokens)), uint32(len(draft))
		p.Tokens = append(p.Tokens, draft...)
	}
	p.Decodes = append(p.Decodes, d)
}

// Rows is the batch rows the plan's step carries: its prefill chunks, one
// per decode and its draft tokens.
func (p *Plan) Rows() int {
	n := 0
	for i := range p.Prefills {
		n += int(p.Prefills[i].Count)
	}
	for i := range p.Decodes {
		n += 1 + int(p.Decodes[i].DraftLen)
	}
	return n
}

// Plan is one engine step's work: retires first, then admits, then one
// batch of every prefill chunk beside one token per decoding lane (a single
// llama_decode). Reuse a Plan across steps with Reset so that steady-state
// steps allocate nothing.
type Plan struct {
	Retires  []uint32
	Admits   []Admit
	Prefills []Prefill
	Decodes  []Decode
	Tokens   []Token
	Biases   []LogitBias
	// LoRA is the step's adapter scales, one per adapter the engine loaded
	// (Descriptor.LoRA; 0: not applied); empty: no adapter. llama.cpp
	// applies adapters to the whole context, so every lane of the step
	// runs under this set: the scheduler plans lanes of one set together.
	LoRA []float32
}

// Reset empties the plan, keeping its storage.
func (p *Plan) Reset() {
	p.Retires = p.Retires[:0]
	p.Admits = p.Admits[:0]
	p.Prefills = p.Prefills[:0]
	p.Decodes = p.Decodes[:0]
	p.Tokens = p.Tokens[:0]
	p.Biases = p.Biases[:0]
	p.LoRA = p.LoRA[:0]
}

// AddAdmit appends an admission whose prompt and logit bias are copied into
// the plan's token and bias arrays; a's offsets and lengths are set here.
func (p *Plan) AddAdmit(a Admit, prompt []Token, bias []LogitBias) {
	a.PromptOff = uint32(len(p.Tokens))
	a.PromptLen = uint32(len(prompt))
	a.BiasOff = uint32(len(p.Biases))
	a.BiasLen = uint32(len(bias))
	p.Tokens = append(p.Tokens, prompt...)
	p.Biases = append(p.Biases, bias...)
	p.Admits = append(p.Admits, a)
}

// Empty reports whether the plan asks for nothing.
func (p *Plan) Empty() bool {
	return len(p.Retires)+len(p.Admits)+len(p.Prefills)+len(p.Decodes) == 0
}

// BansEveryToken reports whether bias leaves no token that can be sampled:
// every token of a vocabulary of n gets -inf. Such a lane has nothing to
// sample, so requests carrying it are refused.
func BansEveryToken(bias []LogitBias, n int) bool {
	if n <= 0 || len(bias) < n {
		return false
	}
	banned := make([]bool, n)
	count := 0
	for _, b := range bias {
		if b.Token >= 0 && int(b.Token) < n && math.IsInf(float64(b.Bias), -1) && !banned[b.Token] {
			banned[b.Token] = true
			count++
		}
	}
	return count == n
}
