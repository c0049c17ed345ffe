package engine

import "fmt"

// Pooling is how an embedding model pools its tokens' vectors into one
// (llama.cpp's enum llama_pooling_type, read from <arch>.pooling_type).
type Pooling int32

// Pooling types. PoolingNone is a generation model.
const (
	PoolingNone Pooling = 0
	PoolingMean Pooling = 1 // the mean of every token's vector
	PoolingCLS  Pooling = 2 // the first token's vector
	PoolingLast Pooling = 3 // the last token's vector
	// PoolingRank is a reranker's: a pooled row through the model's
	// classifier head, one score per label (the first is the relevance).
	PoolingRank Pooling = 4
)

func (p Pooling) String() string {
	switch p {
	case PoolingNone:
		return "none"
	case PoolingMean:
		return "mean"
	case PoolingCLS:
		return "cls"
	case PoolingLast:
		return "last"
	case PoolingRank:
		return "rank"
	}
	return fmt.Sprintf("pooling %d", int32(p))
}

// MarshalText writes the pooling's name, as the descriptor's JSON shows it.
func (p Pooling) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Embedder computes pooled embeddings: what an engine opened on an
// embedding model (Descriptor.Pooling not PoolingNone) does instead of
// Tick. Its owner goroutine calls it, as it does Engine's stepping calls.
type Embedder interface {
	// EmbedLimits are the most inputs and the most tokens (all inputs
	// together) one Embed call takes; an input longer than maxTokens can
	// never be embedded.
	EmbedLimits() (maxInputs, maxTokens int)
	// EmbedDim is the length of one vector.
	EmbedDim() int
	// Embed runs the inputs in one engine step and appends each one's
	// pooled vector (EmbedDim floats, not normalized) to dst, in order. A
	// call over the limits, an empty input or a token outside the
	// vocabulary is refused (an *Error) before the engine runs.
	Embed(inputs [][]Token, dst []float32) ([]float32, error)
}
