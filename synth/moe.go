package synth

import (
	"fmt"

	"superfluid/gguf"
)

// Mixture of experts: each layer's FFN is Experts small SwiGLU blocks, of
// which a router picks ExpertsUsed per token (Qwen3-30B-A3B: 128 and 8;
// gpt-oss-20b: 32 and 4). The synthetic models keep a small realistic
// ratio, 8 experts with 2 used, each a quarter of the dense FFN wide, so
// the active FFN per token is half the dense one and the file holds twice
// its FFN weights.
const (
	moeExperts     = 8
	moeExpertsUsed = 2
	moeWidthDiv    = 4
)

// expertWidth is one expert's FFN width.
func expertWidth(s Shape) int { return s.FFN / moeWidthDiv }

func validateMoE(s Shape) error {
	if expertWidth(s)%32 != 0 {
		return fmt.Errorf("synth: shape %q: an expert's FFN width %d (FFN/%d) must be a multiple of 32", s.Name, expertWidth(s), moeWidthDiv)
	}
	return nil
}

// moeKeys are the expert counts and width.
func moeKeys(w *gguf.Writer, p string, s Shape) {
	w.Set(p+".expert_count", uint32(moeExperts))
	w.Set(p+".expert_used_count", uint32(moeExpertsUsed))
	w.Set(p+".expert_feed_forward_length", uint32(expertWidth(s)))
}

// expertFFN writes the router and the experts' stacked matrices ({in, out,
// expert}, as llama.cpp's MUL_MAT_ID reads them).
func expertFFN(w *gguf.Writer, g gen, p string, s Shape) {
	ff := expertWidth(s)
	w.AddTensor(g.matrix(p+"ffn_gate_inp.weight", s.Embd, moeExperts, inv(s.Embd), nil))
	w.AddTensor(g.experts(p+"ffn_gate_exps.weight", s.Embd, ff, moeExperts, inv(s.Embd)))
	w.AddTensor(g.experts(p+"ffn_up_exps.weight", s.Embd, ff, moeExperts, inv(s.Embd)))
	w.AddTensor(g.experts(p+"ffn_down_exps.weight", ff, s.Embd, moeExperts, ffnDownGain*inv(ff)))
}

// experts describes n stacked {ne0, ne1} matrices: the same rows as one
// {ne0, ne1*n} matrix, so it is generated as that.
func (g gen) experts(name string, ne0, ne1, n int, std float64) gguf.Tensor {
	t := g.matrix(name, ne0, ne1*n, std, nil)
	t.Shape = []uint64{uint64(ne0), uint64(ne1), uint64(n)}
	return t
}

// qwen3moeBlock is Qwen3's layer with the dense FFN replaced by experts.
func qwen3moeBlock(w *gguf.Writer, g gen, p string, _ int, s Shape) {
	w.AddTensor(ones(p+"attn_norm.weight", s.Embd))
	attention(w, g, p, s, s.Embd)
	w.AddTensor(ones(p+"attn_q_norm.weight", s.HeadDim()))
	w.AddTensor(ones(p+"attn_k_norm.weight", s.HeadDim()))
	w.AddTensor(ones(p+"ffn_norm.weight", s.Embd))
	expertFFN(w, g, p, s)
}

// qwen35MoEFFN is Qwen3.5-MoE's FFN: the routed experts beside one shared
// expert, whose output a per-token sigmoid gate scales.
func qwen35MoEFFN(w *gguf.Writer, g gen, p string, s Shape) {
	expertFFN(w, g, p, s)
	f32 := gen{seed: g.seed, typ: gguf.F32}
	w.AddTensor(f32.vector(p+"ffn_gate_inp_shexp.weight", s.Embd, inv(s.Embd)))
	denseFFN(w, g, p, s, "_shexp", expertWidth(s))
}

// vector is an f32 vector of n random values (a matrix of one row, stored
// one-dimensional as converted models store such gates).
func (g gen) vector(name string, n int, std float64) gguf.Tensor {
	t := g.matrix(name, n, 1, std, nil)
	t.Shape = []uint64{uint64(n)}
	return t
}
