package synth

import (
	"fmt"
	"strings"

	"superfluid/gguf"
)

// Options select what Write generates.
type Options struct {
	Shape Shape
	// VocabFile is a vocab-only GGUF whose tokenizer is grafted onto the
	// model; "" uses the built-in vocabulary.
	VocabFile string
	// Type is the matrix encoding: "f16" (default when empty), "q8_0" or
	// "q4_0" (the type the CPU backend repacks on x86; see cgo.Options).
	Type string
	Seed uint64
	// Arch is the architecture: "llama" (default when empty), "qwen2",
	// "qwen3", "gemma4", "qwen35", "qwen35moe" or "qwen3moe" (ArchNames).
	Arch string
	// Pooling makes an embedding model: "mean", "cls" or "last" is written
	// as <arch>.pooling_type (PoolingTypes); "" or "none" writes no key,
	// which is a generation model. "rank" makes a reranker (qwen3 only):
	// see rerank.go.
	Pooling string
	// Metadata are extra keys (e.g. general.sampling.*), set after the
	// generated ones; a key already set is replaced.
	Metadata []gguf.KV
}

// PoolingTypes are llama.cpp's enum llama_pooling_type values by name, as
// <arch>.pooling_type stores them.
var PoolingTypes = map[string]uint32{"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": poolingRank}

// poolingType maps Options.Pooling to the key's value; ok false for none.
func poolingType(name string) (v uint32, ok bool, err error) {
	if name == "" {
		return 0, false, nil
	}
	v, known := PoolingTypes[strings.ToLower(name)]
	if !known {
		return 0, false, fmt.Errorf("synth: unknown pooling %q (valid: none, mean, cls, last, rank)", name)
	}
	return v, v != 0, nil
}

// SuppressScale multiplies the token_embd rows of tokens greedy decoding
// must avoid (see classify). Embeddings are tied, so a row also serves as
// the token's output weights: a row shrunk a hundredfold has logits near
// zero while ordinary tokens' logits spread over several units, so the
// argmax is always an ordinary text token — no byte fragments, no control
// or end-of-generation tokens — and generation runs to the requested
// length.
const SuppressScale = 0.01

// general.file_type values (llama_ftype): all matrices F16 / Q4_0 / Q8_0.
const (
	fileTypeF16  uint32 = 1
	fileTypeQ4_0 uint32 = 2
	fileTypeQ8_0 uint32 = 7
)

// ggmlType maps Options.Type to the tensor type and general.file_type.
func ggmlType(name string) (gguf.GGMLType, uint32, error) {
	switch strings.ToLower(name) {
	case "", "f16":
		return gguf.F16, fileTypeF16, nil
	case "q8_0":
		return gguf.Q8_0, fileTypeQ8_0, nil
	case "q4_0":
		return gguf.Q4_0, fileTypeQ4_0, nil
	}
	return 0, 0, fmt.Errorf("synth: unknown type %q (valid: f16, q8_0, q4_0)", name)
}

// Write generates the model and writes it to path atomically (a temporary
// file in the same directory, renamed into place when complete). The same
// options always produce byte-identical files.
func Write(path string, o Options) error {
	s := o.Shape
	if err := s.Validate(); err != nil {
		return err
	}
	typ, fileType, err := ggmlType(o.Type)
	if err != nil {
		return err
	}
	a, err := archByName(o.Arch)
	if err != nil {
		return err
	}
	if a.validate != nil {
		if err := a.validate(s); err != nil {
			return err
		}
	}
	if v, _, err := poolingType(o.Pooling); err != nil {
		return err
	} else if v == poolingRank && a.name != "qwen3" {
		return fmt.Errorf("synth: a reranker (pooling rank) is written for qwen3 only, not %s: its loader is the one that reads a cls.output head among the architectures synth writes", a.name)
	}
	var voc *vocab
	if o.VocabFile == "" {
		padTo := s.Vocab
		if padTo == 0 {
			padTo = BuiltinVocabSize()
		}
		voc, err = builtinVocab(padTo)
	} else {
		voc, err = graftVocab(o.VocabFile)
	}
	if err != nil {
		return err
	}

	w := gguf.NewWriter()
	addMetadata(w, o, a, voc, fileType)
	for _, kv := range o.Metadata {
		w.SetValue(kv.Key, kv.Value)
	}
	addTensors(w, s, a, voc, gen{seed: o.Seed, typ: typ})
	if v, _, _ := poolingType(o.Pooling); v == poolingRank {
		addRerankHead(w, s, gen{seed: o.Seed, typ: typ})
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}
