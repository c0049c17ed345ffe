package synth

import (
	"fmt"

	"superfluid/gguf"
)

// GLM-4.5's layout (glm4moe): plain attention with Q/K/V biases, a dense
// first layer, then routed experts beside a shared one under a sigmoid
// router with a per-expert bias, and after the trunk one multi-token
// prediction (NextN) block: the trunk's last hidden state and the next
// token's embedding, each normed, concatenated and projected back to the
// model's width, then a whole decoder layer and the tied output head. The
// engine drafts from that block (--spec-type draft-mtp); because the trunk
// is plain attention, a rejected draft is cut back out of the KV cache.

// glm4moeMTPLayers is the NextN blocks written: llama.cpp runs one for
// this family.
const glm4moeMTPLayers = 1

func glm4moeKeys(w *gguf.Writer, p string, s Shape) {
	w.Set(p+".block_count", uint32(s.Layers+glm4moeMTPLayers))
	w.Set(p+".nextn_predict_layers", uint32(glm4moeMTPLayers))
	w.Set(p+".leading_dense_block_count", uint32(1))
	w.Set(p+".attention.key_length", uint32(s.HeadDim()))
	w.Set(p+".attention.value_length", uint32(s.HeadDim()))
	moeKeys(w, p, s)
	w.Set(p+".expert_shared_count", uint32(1))
	w.Set(p+".expert_weights_norm", true)
	w.Set(p+".expert_weights_scale", float32(1))
}

func validateGLM4MoE(s Shape) error {
	if s.Layers < 2 {
		return fmt.Errorf("synth: shape %q: glm4moe needs 2 layers at least (a dense first one, then experts)", s.Name)
	}
	return validateMoE(s)
}

// glm4moeBlock writes trunk layer l: attention, then the dense FFN in
// layer 0 and experts after.
func glm4moeBlock(w *gguf.Writer, g gen, p string, l int, s Shape) {
	glm4moeAttention(w, g, p, s)
	if l == 0 {
		denseFFN(w, g, p, s, "", s.FFN)
		return
	}
	glm4moeExperts(w, g, p, s)
}

func glm4moeAttention(w *gguf.Writer, g gen, p string, s Shape) {
	w.AddTensor(ones(p+"attn_norm.weight", s.Embd))
	attention(w, g, p, s, s.Embd)
	w.AddTensor(filled(p+"attn_q.bias", s.Embd, 0))
	w.AddTensor(filled(p+"attn_k.bias", s.KVDim(), 0))
	w.AddTensor(filled(p+"attn_v.bias", s.KVDim(), 0))
	// GLM's "post attention" norm is the FFN's input norm.
	w.AddTensor(ones(p+"post_attention_norm.weight", s.Embd))
}

func glm4moeExperts(w *gguf.Writer, g gen, p string, s Shape) {
	expertFFN(w, g, p, s)
	w.AddTensor(filled(p+"exp_probs_b.bias", moeExperts, 0))
	denseFFN(w, g, p, s, "_shexp", expertWidth(s))
}

// glm4moeMTP writes the NextN block after the trunk, at layer s.Layers.
func glm4moeMTP(w *gguf.Writer, g gen, s Shape) {
	for l := s.Layers; l < s.Layers+glm4moeMTPLayers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		glm4moeAttention(w, g, p, s)
		glm4moeExperts(w, g, p, s)
		w.AddTensor(g.matrix(p+"nextn.eh_proj.weight", 2*s.Embd, s.Embd, inv(2*s.Embd), nil))
		w.AddTensor(ones(p+"nextn.enorm.weight", s.Embd))
		w.AddTensor(ones(p+"nextn.hnorm.weight", s.Embd))
		w.AddTensor(ones(p+"nextn.shared_head_norm.weight", s.Embd))
	}
}

// Qwen3.5's multi-token prediction block (qwen35mtp): the same NextN
// projection, then one full-attention layer of the trunk's kind (gated
// query, Q/K norms, dense FFN), and the tied output head. llama.cpp runs
// it on a plain KV cache of its own, so only the trunk's recurrent state
// needs rollback after a rejected draft.
const qwen35MTPLayers = 1

func qwen35MTPKeys(w *gguf.Writer, p string, s Shape) {
	qwen35Keys(w, p, s)
	w.Set(p+".block_count", uint32(s.Layers+qwen35MTPLayers))
	w.Set(p+".nextn_predict_layers", uint32(qwen35MTPLayers))
}

// qwen35MTP writes the NextN block after the trunk, at layer s.Layers.
func qwen35MTP(w *gguf.Writer, g gen, s Shape) {
	for l := s.Layers; l < s.Layers+qwen35MTPLayers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		w.AddTensor(ones(p+"attn_norm.weight", s.Embd))
		w.AddTensor(ones(p+"post_attention_norm.weight", s.Embd))
		attention(w, g, p, s, 2*s.Embd)
		w.AddTensor(ones(p+"attn_q_norm.weight", s.HeadDim()))
		w.AddTensor(ones(p+"attn_k_norm.weight", s.HeadDim()))
		qwen35DenseFFN(w, g, p, s)
		w.AddTensor(g.matrix(p+"nextn.eh_proj.weight", 2*s.Embd, s.Embd, inv(2*s.Embd), nil))
		w.AddTensor(ones(p+"nextn.enorm.weight", s.Embd))
		w.AddTensor(ones(p+"nextn.hnorm.weight", s.Embd))
		w.AddTensor(ones(p+"nextn.shared_head_norm.weight", s.Embd))
	}
}
