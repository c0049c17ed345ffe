package synth

import (
	"fmt"

	"superfluid/gguf"
)

// Qwen3.5 (2026) is a hybrid: most layers are gated delta nets — linear
// attention whose whole history is a fixed-size recurrent state per
// sequence, with a short causal convolution before it — and every
// full-attention interval-th layer is ordinary attention with a KV cache.
// qwen35moe is the same with a mixture-of-experts FFN. llama.cpp loads
// them with a hybrid memory (KV cells beside recurrent state cells), which
// is what makes them a distinct case for the prefix cache.
//
// The dimensions follow from the shape: a delta-net head is as wide as an
// attention head (ssm.state_size = HeadDim), there are Heads value heads
// and Heads/2 key heads (llama.cpp broadcasts each key head over two value
// heads, as in the real models), so ssm.inner_size = Embd.

// gdnConvKernel is the causal convolution's width (Qwen3.5's is 4).
const gdnConvKernel = 4

// gdnDims are a gated delta net's widths.
type gdnDims struct {
	headDim, kHeads, vHeads int
}

func gdn(s Shape) gdnDims { return gdnDims{headDim: s.HeadDim(), kHeads: s.Heads / 2, vHeads: s.Heads} }

func (d gdnDims) keyDim() int   { return d.headDim * d.kHeads }
func (d gdnDims) valueDim() int { return d.headDim * d.vHeads }

// convDim is the convolution's channels: Q and K (key heads) and V.
func (d gdnDims) convDim() int { return 2*d.keyDim() + d.valueDim() }

// fullAttentionInterval: every interval-th layer attends (Qwen3.5's is 4);
// a model shallower than that still gets one attention layer, its last.
func fullAttentionInterval(s Shape) int { return min(4, s.Layers) }

// isRecurrent says whether layer l is a delta-net layer, as llama.cpp
// derives it from full_attention_interval.
func isRecurrent(l int, s Shape) bool { return (l+1)%fullAttentionInterval(s) != 0 }

// RecurrentLayers lists which layers of an arch are recurrent at shape s
// (nil for an architecture without recurrent layers).
func RecurrentLayers(archName string, s Shape) ([]bool, error) {
	a, err := archByName(archName)
	if err != nil {
		return nil, err
	}
	if !a.hybrid {
		return nil, nil
	}
	out := make([]bool, s.Layers)
	for l := range out {
		out[l] = isRecurrent(l, s)
	}
	return out, nil
}

func validateQwen35(s Shape) error {
	if s.Heads%2 != 0 {
		return fmt.Errorf("synth: shape %q: qwen35 needs an even head count for its key heads (%d heads)", s.Name, s.Heads)
	}
	return nil
}

// qwen35Keys are the hybrid's metadata beyond the llama keys.
func qwen35Keys(w *gguf.Writer, p string, s Shape) {
	w.Set(p+".attention.key_length", uint32(s.HeadDim()))
	w.Set(p+".attention.value_length", uint32(s.HeadDim()))
	// Multimodal RoPE sections (pairs of dimensions per position axis),
	// in Qwen3.5's proportions 11:11:10 of the rotated pairs; text gives
	// every axis the same position, so this is plain RoPE for our prompts.
	half := s.HeadDim() / 2
	s0 := (11*half + 31) / 32
	w.Set(p+".rope.dimension_sections", []int32{int32(s0), int32(s0), int32(half - 2*s0), 0})
	d := gdn(s)
	w.Set(p+".ssm.conv_kernel", uint32(gdnConvKernel))
	w.Set(p+".ssm.inner_size", uint32(d.valueDim()))
	w.Set(p+".ssm.state_size", uint32(d.headDim))
	w.Set(p+".ssm.time_step_rank", uint32(d.vHeads))
	w.Set(p+".ssm.group_count", uint32(d.kHeads))
	w.Set(p+".full_attention_interval", uint32(fullAttentionInterval(s)))
}

// qwen35Block writes one layer: the norms either side of the token mixer
// (the second is the FFN's input norm: Qwen3.5 has no ffn_norm), the
// mixer — gated delta net or gated attention — and the FFN, dense or
// experts.
func qwen35Block(ffn func(w *gguf.Writer, g gen, p string, s Shape)) func(*gguf.Writer, gen, string, int, Shape) {
	return func(w *gguf.Writer, g gen, p string, l int, s Shape) {
		w.AddTensor(ones(p+"attn_norm.weight", s.Embd))
		w.AddTensor(ones(p+"post_attention_norm.weight", s.Embd))
		if isRecurrent(l, s) {
			gatedDeltaNet(w, g, p, s)
		} else {
			// Q carries the output gate beside the query: twice as wide.
			attention(w, g, p, s, 2*s.Embd)
			w.AddTensor(ones(p+"attn_q_norm.weight", s.HeadDim()))
			w.AddTensor(ones(p+"attn_k_norm.weight", s.HeadDim()))
		}
		ffn(w, g, p, s)
	}
}

// gatedDeltaNet writes a linear-attention layer's tensors. The small ones
// stay f32 as converted models keep them (ggml's convolution wants f32).
//
// The decay per token is exp(softplus(alpha + dt) * a): with a = -1 and
// dt = -2 it is about 0.88 at alpha = 0, so the state remembers some tens
// of tokens — long enough that a changed early token changes later output,
// which is what a test of recurrent-state reuse needs to see.
func gatedDeltaNet(w *gguf.Writer, g gen, p string, s Shape) {
	d := gdn(s)
	f32 := gen{seed: g.seed, typ: gguf.F32}
	w.AddTensor(g.matrix(p+"attn_qkv.weight", s.Embd, d.convDim(), inv(s.Embd), nil))
	w.AddTensor(g.matrix(p+"attn_gate.weight", s.Embd, d.valueDim(), inv(s.Embd), nil))
	w.AddTensor(f32.matrix(p+"ssm_conv1d.weight", gdnConvKernel, d.convDim(), inv(gdnConvKernel), nil))
	w.AddTensor(filled(p+"ssm_dt.bias", d.vHeads, -2))
	w.AddTensor(filled(p+"ssm_a", d.vHeads, -1))
	w.AddTensor(g.matrix(p+"ssm_beta.weight", s.Embd, d.vHeads, inv(s.Embd), nil))
	w.AddTensor(g.matrix(p+"ssm_alpha.weight", s.Embd, d.vHeads, inv(s.Embd), nil))
	w.AddTensor(ones(p+"ssm_norm.weight", d.headDim))
	w.AddTensor(g.matrix(p+"ssm_out.weight", d.valueDim(), s.Embd, attnOutGain*inv(d.valueDim()), nil))
}

// qwen35DenseFFN is Qwen3.5's FFN: a dense SwiGLU block.
func qwen35DenseFFN(w *gguf.Writer, g gen, p string, s Shape) { denseFFN(w, g, p, s, "", s.FFN) }
