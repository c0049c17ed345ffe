package http

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/embed"
	"superfluid/engine"
	"superfluid/sched"
)

// What the four embedding APIs share: the inputs tokenized (and truncated
// where the API asks), one call to the embedding runner for all of them,
// each vector cut to the dimensions asked for and normalized as the API
// normalizes, and the encodings. Each API's file only reads its request
// into an embedSpec and words the response.

// maxEmbedInputs bounds the inputs of one request (OpenAI's limit).
const maxEmbedInputs = 2048

// Normalizations (llama.cpp's embd_normalize values; p ≥ 1 is the p-norm).
const (
	normNone   = -1 // the pooled vector as the model computed it
	normMaxAbs = 0  // scaled so the largest magnitude is 32760 (an int16 range)
	normL2     = 2  // unit length: what OpenAI, Ollama's /api/embed and llama.cpp return by default
)

// embedInput is one input as a request sent it: text, or token ids.
type embedInput struct {
	text     string
	tokens   []engine.Token
	isTokens bool
}

// embedSpec is an embedding request, whichever API sent it.
type embedSpec struct {
	inputs []embedInput
	field  string // the request's name for its inputs, for errors
	// truncate cuts an input longer than the engine takes (or than limit)
	// to its first tokens; otherwise such an input is a 400.
	truncate bool
	limit    int // a tighter bound on an input's tokens (Ollama's num_ctx); 0: none
	dims     int // keep the first dims values (then normalize); 0: all
	norm     int // normNone, normMaxAbs or a p-norm
}

// embedResult is every input's final vector and what it took.
type embedResult struct {
	vecs   [][]float32
	tokens int // tokens embedded, all inputs together
	took   time.Duration
}

// embedClass is the class an embedding request runs in: Background unless
// the X-Superfluid-Class header names another, so that indexing a
// repository never slows a person's completions.
func embedClass(ctx *fasthttp.RequestCtx) (sched.Class, error) {
	name := string(ctx.Request.Header.Peek("X-Superfluid-Class"))
	if name == "" {
		return sched.Background, nil
	}
	c, err := sched.ParseClass(name)
	if err != nil {
		return 0, badParam("class", "%v", err)
	}
	return c, nil
}

// errNoEmbeddings is the refusal of an embedding request to a generation
// model, as Ollama words it.
func errNoEmbeddings(m *Model) error {
	return badRequest("model %q does not support embeddings", m.Name)
}

// checkEmbedDims refuses a dimensions value the model cannot give.
func checkEmbedDims(m *Model, field string, dims int) error {
	if dims < 0 || dims > m.Embed.Dim() {
		return badParam(field, "%s must be between 1 and the model's %d dimensions, got %d", field, m.Embed.Dim(), dims)
	}
	return nil
}

// runEmbed embeds every input of sp in the request's class.
func (s *Server) runEmbed(ctx *fasthttp.RequestCtx, m *Model, sp *embedSpec) (embedResult, error) {
	start := time.Now()
	if m.Embed == nil {
		return embedResult{}, errNoEmbeddings(m)
	}
	if err := checkEmbedDims(m, "dimensions", sp.dims); err != nil {
		return embedResult{}, err
	}
	class, err := embedClass(ctx)
	if err != nil {
		return embedResult{}, err
	}
	inputs, total, err := embedTokens(m, sp)
	if err != nil {
		return embedResult{}, err
	}
	rctx, cancel := s.requestContext(ctx)
	defer cancel()
	vecs, err := m.Embed.Embed(rctx, inputs, class)
	if err != nil {
		return embedResult{}, embedError(sp.field, err)
	}
	for i, v := range vecs {
		if sp.dims > 0 {
			v = v[:sp.dims]
		}
		if vecs[i], err = normalize(v, sp.norm); err != nil {
			return embedResult{}, serverError("input %d: %v", i, err)
		}
	}
	return embedResult{vecs: vecs, tokens: total, took: time.Since(start)}, nil
}

// embedTokens tokenizes the inputs (special tokens added and parsed, as
// llama.cpp's server does) and checks or cuts them to what fits.
func embedTokens(m *Model, sp *embedSpec) ([][]engine.Token, int, error) {
	if len(sp.inputs) == 0 {
		return nil, 0, badParam(sp.field, "%s has no inputs", sp.field)
	}
	if len(sp.inputs) > maxEmbedInputs {
		return nil, 0, badParam(sp.field, "%s has %d inputs; at most %d are embedded in one request", sp.field, len(sp.inputs), maxEmbedInputs)
	}
	limit := m.Embed.MaxInputTokens()
	if sp.limit > 0 {
		limit = min(limit, sp.limit)
	}
	out := make([][]engine.Token, len(sp.inputs))
	total := 0
	for i, in := range sp.inputs {
		toks := in.tokens
		if !in.isTokens {
			var err error
			if toks, err = embedTokenize(m, sp, i, in.text); err != nil {
				return nil, 0, err
			}
		}
		if len(toks) == 0 {
			return nil, 0, badParam(sp.field, "%s: input %d is empty", sp.field, i)
		}
		if len(toks) > limit {
			if !sp.truncate {
				e := badParam(sp.field, "%s: input %d is %d tokens; an input may have at most %d (the context of one embedding call)", sp.field, i, len(toks), limit)
				e.Code = "context_length_exceeded"
				return nil, 0, e
			}
			toks = cutInput(m, toks, limit, !in.isTokens)
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

func embedTokenize(m *Model, sp *embedSpec, i int, text string) ([]engine.Token, error) {
	if limit := maxPromptBytes(m); len(text) > limit {
		if !sp.truncate {
			return nil, checkPromptBytes(m, sp.field, len(text))
		}
		// More text than this cannot reach the first tokens the cut keeps.
		text = keepHead(text, limit)
	}
	// add_special as llama-server passes it: the vocabulary's own BOS and
	// EOS rules apply (an embedding model that pools its last token, as
	// Qwen3-Embedding does, needs the EOS it appends).
	toks, err := m.Text.Tokenize(text, true, true)
	if errors.Is(err, engine.ErrClosed) {
		return nil, errShutDown
	}
	if err != nil {
		return nil, badParam(sp.field, "%s: cannot tokenize input %d: %v", sp.field, i, err)
	}
	return toks, nil
}

// embedError maps the runner's refusals to the API's errors.
func embedError(field string, err error) error {
	var ie *embed.InputError
	switch {
	case errors.As(err, &ie):
		return badParam(field, "%s: %v", field, err)
	case errors.Is(err, embed.ErrQueueFull):
		return &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "overloaded_error", Msg: "too many embedding inputs are queued; try again shortly"}
	case errors.Is(err, embed.ErrClosed):
		return unavailable("the server is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away (or a dispatched batch request was
		// abandoned); nobody reads this answer.
		return &apiError{Status: 499, Type: "invalid_request_error", Msg: "the request was cancelled before its inputs ran"}
	}
	return serverError("embedding: %v", err)
}

// normalize scales v in place as llama.cpp's common_embd_normalize does
// for norm (none, max-abs to an int16 range, p-norm); a zero vector stays
// zero. A vector with NaN or ±inf is refused, as Ollama refuses it: JSON
// cannot carry it and no client could use it.
func normalize(v []float32, norm int) ([]float32, error) {
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
	case norm == normNone:
		return v, nil
	case norm == normMaxAbs:
		sum = maxAbs / 32760
	case norm == normL2:
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

// base64Floats is v as OpenAI's encoding_format "base64" sends it: the
// little-endian float32 bytes, base64-encoded (what numpy.frombuffer
// with dtype float32 reads back).
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// embedNormParam reads llama.cpp's embd_normalize: an integer ≥ -1.
func embedNormParam(n *int64) (int, error) {
	if n == nil {
		return normL2, nil
	}
	if *n < normNone || *n > math.MaxInt32 {
		return 0, badParam("embd_normalize", "embd_normalize must be -1 (none), 0 (max absolute), 1 (taxicab), 2 (euclidean) or a larger p-norm, got %d", *n)
	}
	return int(*n), nil
}
