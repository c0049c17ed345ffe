package synth

import (
	"fmt"
	"sort"
	"strings"

	"superfluid/gguf"
)

// An arch is one llama.cpp architecture the generator can write: its name
// (general.architecture and the metadata key prefix), the keys beyond the
// llama ones, and the tensors beyond the llama layout in each layer.
//
// llama, qwen2 and qwen3 load in every llama.cpp we build against; gemma4
// (2026) only in a current upstream one, so a test can show the current
// engine loading it and the Go module's refusing it by name.
type arch struct {
	name string
	// keys adds the architecture's own metadata.
	keys func(w *gguf.Writer, p string, s Shape)
	// layer adds tensors of layer l beside the llama ones.
	layer func(w *gguf.Writer, p string, l int, s Shape)
	// global adds tensors outside the layers.
	global func(w *gguf.Writer, s Shape)
}

var arches = map[string]arch{
	"llama": {name: "llama"},
	// Qwen2 (and Qwen2.5): the llama layout with biases on Q, K and V.
	"qwen2": {name: "qwen2", layer: func(w *gguf.Writer, p string, _ int, s Shape) {
		w.AddTensor(filled(p+"attn_q.bias", s.Embd, 0))
		w.AddTensor(filled(p+"attn_k.bias", s.KVDim(), 0))
		w.AddTensor(filled(p+"attn_v.bias", s.KVDim(), 0))
	}},
	// Qwen3: no biases; RMS norms over each head of Q and K.
	"qwen3": {name: "qwen3",
		keys: func(w *gguf.Writer, p string, s Shape) {
			w.Set(p+".attention.key_length", uint32(s.HeadDim()))
			w.Set(p+".attention.value_length", uint32(s.HeadDim()))
		},
		layer: func(w *gguf.Writer, p string, _ int, s Shape) {
			w.AddTensor(ones(p+"attn_q_norm.weight", s.HeadDim()))
			w.AddTensor(ones(p+"attn_k_norm.weight", s.HeadDim()))
		}},
	// Gemma 4 (dense): sliding-window layers alternating with full-attention
	// ones, Q/K norms, norms after attention and after the FFN, and
	// frequency factors for the full layers' RoPE.
	"gemma4": {name: "gemma4",
		keys: func(w *gguf.Writer, p string, s Shape) {
			pattern := make([]bool, s.Layers)
			for l := range pattern {
				pattern[l] = l%2 == 0 // even layers slide, odd ones see everything
			}
			w.Set(p+".attention.sliding_window_pattern", pattern)
			w.Set(p+".attention.sliding_window", uint32(512))
			w.Set(p+".attention.key_length", uint32(s.HeadDim()))
			w.Set(p+".attention.value_length", uint32(s.HeadDim()))
			w.Set(p+".attention.key_length_swa", uint32(s.HeadDim()))
			w.Set(p+".attention.value_length_swa", uint32(s.HeadDim()))
			w.Set(p+".embedding_length_per_layer_input", uint32(0))
			w.Set(p+".rope.freq_base_swa", float32(1e4))
		},
		layer: func(w *gguf.Writer, p string, _ int, s Shape) {
			w.AddTensor(ones(p+"attn_q_norm.weight", s.HeadDim()))
			w.AddTensor(ones(p+"attn_k_norm.weight", s.HeadDim()))
			w.AddTensor(ones(p+"post_attention_norm.weight", s.Embd))
			w.AddTensor(ones(p+"post_ffw_norm.weight", s.Embd))
		},
		global: func(w *gguf.Writer, s Shape) {
			w.AddTensor(filled("rope_freqs.weight", s.HeadDim()/2, 1))
		}},
}

// ArchNames lists the architectures Write can generate, sorted.
func ArchNames() []string {
	names := make([]string, 0, len(arches))
	for n := range arches {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func archByName(name string) (arch, error) {
	if name == "" {
		name = "llama"
	}
	a, ok := arches[strings.ToLower(name)]
	if !ok {
		return arch{}, fmt.Errorf("synth: unknown architecture %q (valid: %s)", name, strings.Join(ArchNames(), ", "))
	}
	return a, nil
}

// filled is an f32 vector of n copies of v (biases, RoPE factors).
func filled(name string, n int, v float32) gguf.Tensor {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = v
	}
	b := make([]byte, 4*n)
	gguf.EncodeF32(b, vals)
	return gguf.Tensor{Name: name, Shape: []uint64{uint64(n)}, Type: gguf.F32, Data: b}
}
