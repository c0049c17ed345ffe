// Package synth generates deterministic synthetic models (llama, qwen2,
// qwen3, gemma4, qwen35, qwen35moe, qwen3moe architectures): random weights in the exact tensor layout
// llama.cpp loads, with a
// built-in byte-level BPE vocabulary or one grafted from a vocab-only GGUF.
// They exercise the inference server at realistic sizes without shipping
// real weights, and their greedy output is valid text (see suppress.go).
package synth

import (
	"fmt"
	"sort"
	"strings"
)

// Shape is a model's hyperparameters. Vocab is the vocabulary size with the
// built-in vocabulary, padded with unused tokens so the embedding and output
// matrices cost what a real model's do (0: no padding); a grafted
// vocabulary uses its own token count instead.
type Shape struct {
	Name                              string
	Embd, Layers, Heads, KVHeads, FFN int
	Ctx, Vocab                        int
}

// shapes are the named shapes. 0.5b is Qwen2.5-0.5B's (vocab included);
// tiny is the smallest that still has several heads and GQA, for tests.
var shapes = map[string]func() Shape{
	"tiny": func() Shape {
		return Shape{Name: "tiny", Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128, Ctx: 4096, Vocab: BuiltinVocabSize()}
	},
	"small": func() Shape {
		return Shape{Name: "small", Embd: 512, Layers: 8, Heads: 8, KVHeads: 2, FFN: 1536, Ctx: 8192, Vocab: 32000}
	},
	"0.5b": func() Shape {
		return Shape{Name: "0.5b", Embd: 896, Layers: 24, Heads: 14, KVHeads: 2, FFN: 4864, Ctx: 32768, Vocab: 151936}
	},
}

// ShapeNames lists the named shapes, sorted.
func ShapeNames() []string {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ShapeByName returns a named shape: "tiny", "small" or "0.5b".
func ShapeByName(name string) (Shape, error) {
	f, ok := shapes[strings.ToLower(name)]
	if !ok {
		return Shape{}, fmt.Errorf("synth: unknown shape %q (valid: %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return f(), nil
}

// HeadDim is the per-head dimension (also the RoPE dimension count).
func (s Shape) HeadDim() int { return s.Embd / s.Heads }

// KVDim is the width of the K and V projections (grouped-query attention).
func (s Shape) KVDim() int { return s.HeadDim() * s.KVHeads }

// Validate checks the shape is one llama.cpp can load and we can quantize:
// heads divide the width, KV heads divide the heads, the head dimension is
// even (RoPE rotates pairs) and every matrix row (Embd, FFN values) is a
// whole number of 32-value Q8_0 blocks.
func (s Shape) Validate() error {
	switch {
	case s.Embd <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.FFN <= 0 || s.Ctx <= 0:
		return fmt.Errorf("synth: shape %q: all sizes must be positive: %+v", s.Name, s)
	case s.Embd%s.Heads != 0:
		return fmt.Errorf("synth: shape %q: %d heads do not divide embedding width %d", s.Name, s.Heads, s.Embd)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("synth: shape %q: %d KV heads do not divide %d heads", s.Name, s.KVHeads, s.Heads)
	case s.HeadDim()%2 != 0:
		return fmt.Errorf("synth: shape %q: head dimension %d is odd", s.Name, s.HeadDim())
	case s.Embd%32 != 0 || s.FFN%32 != 0:
		return fmt.Errorf("synth: shape %q: embedding width %d and FFN width %d must be multiples of 32", s.Name, s.Embd, s.FFN)
	}
	return nil
}
