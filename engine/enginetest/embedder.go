package enginetest

import (
	"fmt"
	"math"

	"superfluid/engine"
)

// Embedder is a fake engine.Embedder: deterministic vectors from each
// input's tokens (the same input always gives the same vector; any change
// of a token changes it), refusing exactly what native/embed.cpp refuses,
// with the same statuses (cgo/embed_test.go holds the two to it).
type Embedder struct {
	vocab, seqs, batch, dim int
	// Calls counts the Embed calls that ran.
	Calls int
}

var _ engine.Embedder = (*Embedder)(nil)

// NewEmbedder returns a fake of an embedding engine with seqs sequences,
// a batch (one micro-batch) of batch tokens and vectors of dim floats.
func NewEmbedder(vocab, seqs, batch, dim int) *Embedder {
	return &Embedder{vocab: vocab, seqs: seqs, batch: batch, dim: dim}
}

// EmbedLimits: the sequences and the batch.
func (f *Embedder) EmbedLimits() (int, int) { return f.seqs, f.batch }

// EmbedDim is the vectors' length.
func (f *Embedder) EmbedDim() int { return f.dim }

// Embed checks the call as the native engine does, then appends each
// input's vector.
func (f *Embedder) Embed(inputs [][]engine.Token, dst []float32) ([]float32, error) {
	if err := f.check(inputs); err != nil {
		return dst, err
	}
	f.Calls++
	for _, in := range inputs {
		h := hashTokens(0x9e3779b97f4a7c15, in)
		for range f.dim {
			h = h*6364136223846793005 + 1442695040888963407
			dst = append(dst, float32(int64(h>>40)%2001-1000)/1000)
		}
	}
	return dst, nil
}

func (f *Embedder) check(inputs [][]engine.Token) error {
	refuse := func(s engine.Status, format string, args ...any) error {
		return &engine.Error{Status: s, Op: "embed", Msg: fmt.Sprintf(format, args...)}
	}
	if len(inputs) == 0 {
		return refuse(engine.StatusInvalid, "no inputs")
	}
	if len(inputs) > f.seqs {
		return refuse(engine.StatusSeqRange, "%d inputs, more than the %d sequences", len(inputs), f.seqs)
	}
	total := 0
	for i, in := range inputs {
		if len(in) == 0 {
			return refuse(engine.StatusInvalid, "input %d is empty", i)
		}
		if len(in) > f.batch {
			return refuse(engine.StatusContext, "input %d has %d tokens; at most %d", i, len(in), f.batch)
		}
		for _, t := range in {
			if t < 0 || int(t) >= f.vocab {
				return refuse(engine.StatusInvalid, "input %d: token %d outside the vocabulary", i, t)
			}
		}
		total += len(in)
	}
	if total > f.batch || total > math.MaxInt32 {
		return refuse(engine.StatusBatch, "%d tokens, more than the batch of %d", total, f.batch)
	}
	return nil
}
