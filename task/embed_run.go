package task

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"superfluid/embed"
	"superfluid/engine"
	"superfluid/sched"
)

// What the embedding APIs share: the inputs tokenized (and truncated
// where the API asks), one call to the embedding runner for all of them,
// each vector cut to the dimensions asked for and normalized as the API
// normalizes. Each API only reads its request into an EmbedRequest and
// words the response.

// MaxEmbedInputs bounds the inputs of one request (OpenAI's limit).
const MaxEmbedInputs = 2048

// Normalizations (llama.cpp's embd_normalize values; p ≥ 1 is the p-norm).
const (
	NormNone   = -1 // the pooled vector as the model computed it
	NormMaxAbs = 0  // scaled so the largest magnitude is 32760 (an int16 range)
	NormL2     = 2  // unit length: what OpenAI, Ollama's /api/embed and llama.cpp return by default
)

// EmbedInput is one input as a request sent it: text, or token ids.
type EmbedInput struct {
	Text     string
	Tokens   []engine.Token
	IsTokens bool
}

// EmbedRequest is an embedding request, whichever API sent it.
type EmbedRequest struct {
	Inputs []EmbedInput
	Field  string // the request's name for its inputs, for errors
	// Truncate cuts an input longer than the engine takes (or than Limit)
	// to its first tokens; otherwise such an input is a 400.
	Truncate bool
	Limit    int // a tighter bound on an input's tokens (Ollama's num_ctx); 0: none
	Dims     int // keep the first Dims values (then normalize); 0: all
	Norm     int // NormNone, NormMaxAbs or a p-norm
}

// Embedding is every input's final vector and what it took.
type Embedding struct {
	Vecs   [][]float32
	Tokens int // tokens embedded, all inputs together
	Took   time.Duration
}

// NoEmbeddings is the refusal of an embedding request to a generation
// model, as Ollama words it.
func NoEmbeddings(m *Model) *Error {
	return WrongModelError("model %q does not support embeddings", m.Name)
}

// CheckEmbed refuses a request m cannot embed: m is a generation model, or
// r asks for dimensions m does not have.
func (r *EmbedRequest) CheckEmbed(m *Model) error {
	if m.Embed == nil {
		return NoEmbeddings(m)
	}
	if m.Desc.Pooling == engine.PoolingRank {
		return WrongModelError("model %q is a reranking model: its scores are served by /v1/rerank, not as embeddings", m.Name)
	}
	if r.Dims < 0 || r.Dims > m.Embed.Dim() {
		return BadParam("dimensions", "%s must be between 1 and the model's %d dimensions, got %d", "dimensions", m.Embed.Dim(), r.Dims)
	}
	return nil
}

// Embed embeds every input of r in class c; r has passed CheckEmbed.
func Embed(ctx context.Context, m *Model, c sched.Class, r *EmbedRequest) (Embedding, error) {
	start := time.Now()
	inputs, total, err := embedTokens(m, r)
	if err != nil {
		return Embedding{}, err
	}
	vecs, err := m.Embed.Embed(ctx, inputs, c)
	if err != nil {
		return Embedding{}, embedError(r.Field, err)
	}
	for i, v := range vecs {
		if r.Dims > 0 {
			v = v[:r.Dims]
		}
		if vecs[i], err = Normalize(v, r.Norm); err != nil {
			return Embedding{}, InternalError("input %d: %v", i, err)
		}
	}
	return Embedding{Vecs: vecs, Tokens: total, Took: time.Since(start)}, nil
}

// embedTokens tokenizes the inputs (special tokens added and parsed, as
// llama.cpp's server does) and checks or cuts them to what fits.
func embedTokens(m *Model, r *EmbedRequest) ([][]engine.Token, int, error) {
	if len(r.Inputs) == 0 {
		return nil, 0, BadParam(r.Field, "%s has no inputs", r.Field)
	}
	if len(r.Inputs) > MaxEmbedInputs {
		return nil, 0, BadParam(r.Field, "%s has %d inputs; at most %d are embedded in one request", r.Field, len(r.Inputs), MaxEmbedInputs)
	}
	limit := m.Embed.MaxInputTokens()
	if r.Limit > 0 {
		limit = min(limit, r.Limit)
	}
	out := make([][]engine.Token, len(r.Inputs))
	total := 0
	for i, in := range r.Inputs {
		toks := in.Tokens
		if !in.IsTokens {
			var err error
			if toks, err = embedTokenize(m, r, i, in.Text); err != nil {
				return nil, 0, err
			}
		}
		if len(toks) == 0 {
			return nil, 0, BadParam(r.Field, "%s: input %d is empty", r.Field, i)
		}
		if len(toks) > limit {
			if !r.Truncate {
				return nil, 0, &Error{Kind: ContextExceeded, Param: r.Field, Code: "context_length_exceeded",
					Msg: fmt.Sprintf("%s: input %d is %d tokens; an input may have at most %d (the context of one embedding call)", r.Field, i, len(toks), limit)}
			}
			toks = cutInput(m, toks, limit, !in.IsTokens)
		}
		out[i] = toks
		total += len(toks)
	}
	return out, total, nil
}

// cutInput keeps an input's first limit tokens. A tokenized text that
// ends with the EOS the vocabulary appends keeps it last — Ollama gets the
// same by detokenizing the cut and tokenizing it again — since a model
// pooling its last token is trained to pool that one.
func cutInput(m *Model, toks []engine.Token, limit int, tokenized bool) []engine.Token {
	eos := m.Desc.EOS
	if tokenized && limit >= 2 && eos >= 0 && toks[len(toks)-1] == eos {
		return append(toks[:limit-1:limit-1], eos)
	}
	return toks[:limit]
}

func embedTokenize(m *Model, r *EmbedRequest, i int, text string) ([]engine.Token, error) {
	if limit := MaxPromptBytes(m.Desc); len(text) > limit {
		if !r.Truncate {
			return nil, CheckPromptBytes(m.Desc, r.Field, len(text))
		}
		// More text than this cannot reach the first tokens the cut keeps.
		text = KeepHead(text, limit)
	}
	// add_special as llama-server passes it: the vocabulary's own BOS and
	// EOS rules apply (an embedding model that pools its last token, as
	// Qwen3-Embedding does, needs the EOS it appends).
	toks, err := m.Text.Tokenize(text, true, true)
	if errors.Is(err, engine.ErrClosed) {
		return nil, ErrShutDown
	}
	if err != nil {
		return nil, BadParam(r.Field, "%s: cannot tokenize input %d: %v", r.Field, i, err)
	}
	return toks, nil
}

// embedError maps the runner's refusals to the API's errors.
func embedError(field string, err error) error {
	var ie *embed.InputError
	var te *Error
	switch {
	case errors.As(err, &te): // already in the core's terms (an API key's refusal)
		return te
	case errors.As(err, &ie):
		return BadParam(field, "%s: %v", field, err)
	case errors.Is(err, embed.ErrQueueFull):
		return &Error{Kind: Overloaded, Msg: "too many embedding inputs are queued; try again shortly"}
	case errors.Is(err, embed.ErrClosed):
		return ShuttingDown("the server is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away (or a dispatched batch request was
		// abandoned); nobody reads this answer.
		return &Error{Kind: Cancelled, Msg: "the request was cancelled before its inputs ran"}
	}
	return InternalError("embedding: %v", err)
}

// Normalize scales v in place as llama.cpp's common_embd_normalize does
// for norm (none, max-abs to an int16 range, p-norm); a zero vector stays
// zero. A vector with NaN or ±inf is refused, as Ollama refuses it: JSON
// cannot carry it and no client could use it.
func Normalize(v []float32, norm int) ([]float32, error) {
	maxAbs := 0.0
	for _, x := range v {
		a := math.Abs(float64(x))
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return nil, errors.New("the model computed an embedding with NaN or infinite values")
		}
		maxAbs = max(maxAbs, a)
	}
	var sum float64
	switch {
	case norm == NormNone:
		return v, nil
	case norm == NormMaxAbs:
		sum = maxAbs / 32760
	case norm == NormL2:
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		sum = math.Sqrt(sum)
	default:
		// The p-norm, scaled by the largest magnitude so that no power
		// overflows or underflows whatever p is.
		if maxAbs > 0 {
			for _, x := range v {
				sum += math.Pow(math.Abs(float64(x))/maxAbs, float64(norm))
			}
			sum = maxAbs * math.Pow(sum, 1/float64(norm))
		}
	}
	scale := 0.0
	if sum > 0 {
		scale = 1 / sum
	}
	for i, x := range v {
		v[i] = float32(float64(x) * scale)
	}
	return v, nil
}
