package synth

import (
	"fmt"
	"math"
	"strings"

	"superfluid/gguf"
)

// Weight scales, found by greedy-decoding the generated models with
// llama.cpp.
//
// RMS norm hands every layer unit-scale activations whatever the embedding
// scale, so a small embedding std only matters in the residual stream:
// there the layers' outputs dominate the current token's own embedding,
// which with tied embeddings would otherwise make "repeat the input token"
// the greedy choice at every step (embedding std 1 does exactly that).
//
// Matrices start from std 1/sqrt(fan_in), which keeps each layer's output at
// unit scale. Random attention, though, averages the value vectors of all
// positions, giving every position much the same vector; stacked over the
// layers this washes out what is specific to the current position and the
// output locks into one repeated word. Shrinking the attention output
// projection and amplifying the FFN down projection keeps the
// position-specific signal dominant: with these gains 64 greedy tokens of
// every shape hold 55–60 distinct tokens, against a handful without.
const (
	embdStd     = 0.02
	attnOutGain = 0.3
	ffnDownGain = 3.0
)

// addMetadata sets the keys llama.cpp's llama loader reads, provenance
// keys of our own (ignored by llama.cpp), then the vocabulary's tokenizer.*
// keys.
func addMetadata(w *gguf.Writer, o Options, a arch, voc *vocab, fileType uint32) {
	w.Set("general.architecture", a.name)
	w.Set("general.name", "superfluid-synth-"+o.Shape.Name)
	w.Set("general.file_type", fileType)
	if fileType != fileTypeF16 {
		w.Set("general.quantization_version", uint32(2))
	}
	w.Set(gguf.KeyAlignment, uint32(gguf.DefaultAlignment))
	w.Set(a.name+".context_length", uint32(o.Shape.Ctx))
	w.Set(a.name+".embedding_length", uint32(o.Shape.Embd))
	w.Set(a.name+".block_count", uint32(o.Shape.Layers))
	w.Set(a.name+".feed_forward_length", uint32(o.Shape.FFN))
	w.Set(a.name+".attention.head_count", uint32(o.Shape.Heads))
	w.Set(a.name+".attention.head_count_kv", uint32(o.Shape.KVHeads))
	w.Set(a.name+".rope.dimension_count", uint32(o.Shape.HeadDim()))
	w.Set(a.name+".rope.freq_base", float32(1e6))
	w.Set(a.name+".attention.layer_norm_rms_epsilon", float32(1e-6))
	w.Set(a.name+".vocab_size", uint32(voc.size))
	if a.keys != nil {
		a.keys(w, a.name, o.Shape)
	}
	// llama.cpp's llama loader does not read pooling_type itself (only
	// encoder architectures do); the engine reads the key and opens the
	// context with it, as it would for a BERT model's.
	if v, ok, _ := poolingType(o.Pooling); ok {
		w.Set(a.name+".pooling_type", v)
	}
	w.Set("superfluid.synth.shape", o.Shape.Name)
	w.Set("superfluid.synth.seed", o.Seed)
	w.Set("superfluid.synth.vocab", vocabLabel(o.VocabFile))
	for _, kv := range voc.kvs {
		w.SetValue(kv.Key, kv.Value)
	}
}

// addTensors lays out the llama tensors, and the architecture's own. Embeddings are tied (there is no
// output.weight; llama.cpp then uses token_embd as the output matrix, as
// Qwen2.5-0.5B does), and the rows of suppressed tokens are shrunk by
// SuppressScale.
func addTensors(w *gguf.Writer, s Shape, a arch, voc *vocab, g gen) {
	suppressed := func(row int) float32 {
		if voc.suppress[row] {
			return SuppressScale
		}
		return 1
	}
	w.AddTensor(g.matrix("token_embd.weight", s.Embd, voc.size, embdStd, suppressed))
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if a.block != nil {
			a.block(w, g, p, l, s)
			continue
		}
		w.AddTensor(ones(p+"attn_norm.weight", s.Embd))
		attention(w, g, p, s, s.Embd)
		w.AddTensor(ones(p+"ffn_norm.weight", s.Embd))
		denseFFN(w, g, p, s, "", s.FFN)
		if a.layer != nil {
			a.layer(w, p, l, s)
		}
	}
	w.AddTensor(ones("output_norm.weight", s.Embd))
	if a.global != nil {
		a.global(w, g, s)
	}
}

// inv is the standard deviation that keeps a matrix's output at unit scale.
func inv(fanIn int) float64 { return 1 / math.Sqrt(float64(fanIn)) }

// attention writes the llama attention projections; qOut is Q's width
// (twice the heads' width where Q also carries a gate, as Qwen3.5's does).
func attention(w *gguf.Writer, g gen, p string, s Shape, qOut int) {
	w.AddTensor(g.matrix(p+"attn_q.weight", s.Embd, qOut, inv(s.Embd), nil))
	w.AddTensor(g.matrix(p+"attn_k.weight", s.Embd, s.KVDim(), inv(s.Embd), nil))
	w.AddTensor(g.matrix(p+"attn_v.weight", s.Embd, s.KVDim(), inv(s.Embd), nil))
	w.AddTensor(g.matrix(p+"attn_output.weight", s.Embd, s.Embd, attnOutGain*inv(s.Embd), nil))
}

// denseFFN writes a gated (SwiGLU) feed-forward block of width ff; suffix
// names a variant ("_shexp" for a shared expert).
func denseFFN(w *gguf.Writer, g gen, p string, s Shape, suffix string, ff int) {
	w.AddTensor(g.matrix(p+"ffn_gate"+suffix+".weight", s.Embd, ff, inv(s.Embd), nil))
	w.AddTensor(g.matrix(p+"ffn_up"+suffix+".weight", s.Embd, ff, inv(s.Embd), nil))
	w.AddTensor(g.matrix(p+"ffn_down"+suffix+".weight", ff, s.Embd, ffnDownGain*inv(ff), nil))
}

// vocabLabel names the vocabulary in the metadata, for provenance.
func vocabLabel(file string) string {
	if file == "" {
		return "builtin"
	}
	return file[strings.LastIndexAny(file, `/\`)+1:]
}
