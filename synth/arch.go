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
// llama, qwen2 and qwen3 load in every llama.cpp we build against; the 2026
// families — gemma4 (sliding window), qwen35 (hybrid: attention beside
// gated delta nets), qwen3moe and qwen35moe (mixture of experts) — only in
// a current one (the default engine), so a test can show the Go module's
// older llama.cpp refusing them by name.
type arch struct {
	name string
	// keys adds the architecture's own metadata.
	keys func(w *gguf.Writer, p string, s Shape)
	// layer adds tensors of layer l beside the llama ones.
	layer func(w *gguf.Writer, p string, l int, s Shape)
	// global adds tensors outside the layers.
	global func(w *gguf.Writer, g gen, s Shape)
	// block, when set, writes all of layer l in place of the llama layout
	// (and layer): for architectures whose layers differ in kind (hybrid)
	// or whose FFN is not one dense block (mixture of experts).
	block func(w *gguf.Writer, g gen, p string, l int, s Shape)
	// validate refuses shapes the architecture cannot be written at.
	validate func(s Shape) error
	// hybrid: some layers are recurrent (RecurrentLayers says which).
	hybrid bool
	// mtpLayers: multi-token prediction blocks written after the trunk.
	mtpLayers int
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
		global: func(w *gguf.Writer, _ gen, s Shape) {
			w.AddTensor(filled("rope_freqs.weight", s.HeadDim()/2, 1))
		}},
	// Qwen3.5 (dense FFN) and Qwen3.5-MoE: hybrids (hybrid.go).
	"qwen35": {name: "qwen35", hybrid: true, keys: qwen35Keys, validate: validateQwen35,
		block: qwen35Block(qwen35DenseFFN)},
	"qwen35moe": {name: "qwen35moe", hybrid: true,
		keys: func(w *gguf.Writer, p string, s Shape) {
			qwen35Keys(w, p, s)
			moeKeys(w, p, s)
			w.Set(p+".expert_shared_feed_forward_length", uint32(expertWidth(s)))
		},
		validate: func(s Shape) error {
			if err := validateQwen35(s); err != nil {
				return err
			}
			return validateMoE(s)
		},
		block: qwen35Block(qwen35MoEFFN)},
	// Qwen3-MoE (Qwen3-30B-A3B's layout): Qwen3's attention, experts for
	// the FFN (moe.go).
	"qwen3moe": {name: "qwen3moe",
		keys: func(w *gguf.Writer, p string, s Shape) {
			w.Set(p+".attention.key_length", uint32(s.HeadDim()))
			w.Set(p+".attention.value_length", uint32(s.HeadDim()))
			moeKeys(w, p, s)
		},
		validate: validateMoE, block: qwen3moeBlock},
	// Qwen3.5 with its multi-token prediction block (mtp.go): drafts on a
	// hybrid through recurrent-state rollback.
	"qwen35mtp": {name: "qwen35", hybrid: true, keys: qwen35MTPKeys, validate: validateQwen35,
		block: qwen35Block(qwen35DenseFFN), global: qwen35MTP, mtpLayers: qwen35MTPLayers},
	// GLM-4.5 (glm4moe) with its multi-token prediction block (mtp.go).
	"glm4moe": {name: "glm4moe", keys: glm4moeKeys, validate: validateGLM4MoE, block: glm4moeBlock,
		global: glm4moeMTP, mtpLayers: glm4moeMTPLayers},
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
