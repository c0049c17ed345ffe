package synth

import (
	"strings"
	"testing"

	"superfluid/gguf"
)

// Each architecture writes its own key prefix and the tensors its llama.cpp
// loader requires beyond the llama layout.
func TestArchitectures(t *testing.T) {
	s, err := ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	extra := map[string][]string{
		"llama":  nil,
		"qwen2":  {"blk.1.attn_q.bias", "blk.1.attn_k.bias", "blk.1.attn_v.bias"},
		"qwen3":  {"blk.1.attn_q_norm.weight", "blk.1.attn_k_norm.weight"},
		"gemma4": {"blk.1.attn_q_norm.weight", "blk.1.attn_k_norm.weight", "blk.1.post_attention_norm.weight", "blk.1.post_ffw_norm.weight", "rope_freqs.weight"},
	}
	// The architectures whose layers are not the llama layout plus extras:
	// tensors that must be there, and the total.
	whole := map[string]struct {
		names []string
		total int
	}{
		// Layer 0 a gated delta net (2 norms, 9, FFN 3), layer 1 gated
		// attention (2 norms, 4, Q/K norms 2, FFN 3), and the 2 globals.
		"qwen35": {[]string{"blk.0.ssm_conv1d.weight", "blk.0.ssm_a", "blk.0.ssm_dt.bias", "blk.0.attn_qkv.weight",
			"blk.0.attn_gate.weight", "blk.0.ssm_out.weight", "blk.1.attn_q.weight", "blk.1.post_attention_norm.weight"}, 2 + 14 + 11},
		// As qwen35, each FFN being router, 3 expert stacks, shared-expert
		// gate and a 3-matrix shared expert.
		"qwen35moe": {[]string{"blk.0.ssm_conv1d.weight", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_gate_inp_shexp.weight",
			"blk.1.ffn_down_shexp.weight"}, 2 + 19 + 16},
		// Attention 4, its norms 3, ffn_norm, router and 3 expert stacks.
		"qwen3moe": {[]string{"blk.1.ffn_gate_inp.weight", "blk.1.ffn_up_exps.weight", "blk.1.attn_k_norm.weight"}, 2 + 2*12},
	}
	for _, arch := range ArchNames() {
		t.Run(arch, func(t *testing.T) {
			f, err := gguf.Open(write(t, Options{Shape: s, Seed: 1, Arch: arch}))
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := f.String("general.architecture"); a != arch {
				t.Fatalf("architecture %q, want %q", a, arch)
			}
			if n, ok := f.Uint32(arch + ".block_count"); !ok || n != 2 {
				t.Errorf("%s.block_count = %d, %v", arch, n, ok)
			}
			if w, ok := whole[arch]; ok {
				for _, name := range w.names {
					if _, ok := f.Tensor(name); !ok {
						t.Errorf("missing %s", name)
					}
				}
				if len(f.Tensors) != w.total {
					t.Errorf("%d tensors, want %d", len(f.Tensors), w.total)
				}
				return
			}
			for _, name := range extra[arch] {
				if _, ok := f.Tensor(name); !ok {
					t.Errorf("missing %s", name)
				}
			}
			perLayer, global := 0, 0
			for _, name := range extra[arch] {
				if strings.HasPrefix(name, "blk.") {
					perLayer++
				} else {
					global++
				}
			}
			if want := 2 + global + (9+perLayer)*2; len(f.Tensors) != want {
				t.Errorf("%d tensors, want %d", len(f.Tensors), want)
			}
		})
	}
	if err := Write(t.TempDir()+"/x.gguf", Options{Shape: s, Arch: "mamba9"}); err == nil || !strings.Contains(err.Error(), `"mamba9"`) {
		t.Errorf("unknown arch: %v", err)
	}
}
