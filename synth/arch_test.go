package synth

import (
	"fmt"
	"slices"
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
		// qwen35 and its MTP block (layer 2): 2 norms, gated attention 4,
		// Q/K norms 2, FFN 3, the projection and 3 norms.
		"qwen35mtp": {[]string{"blk.0.ssm_conv1d.weight", "blk.2.attn_q_norm.weight", "blk.2.nextn.eh_proj.weight",
			"blk.2.nextn.shared_head_norm.weight", "blk.2.ffn_down.weight"}, 2 + 14 + 11 + 15},
		// As qwen35, each FFN being router, 3 expert stacks, shared-expert
		// gate and a 3-matrix shared expert.
		"qwen35moe": {[]string{"blk.0.ssm_conv1d.weight", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_gate_inp_shexp.weight",
			"blk.1.ffn_down_shexp.weight"}, 2 + 19 + 16},
		// Attention 4, its norms 3, ffn_norm, router and 3 expert stacks.
		"qwen3moe": {[]string{"blk.1.ffn_gate_inp.weight", "blk.1.ffn_up_exps.weight", "blk.1.attn_k_norm.weight"}, 2 + 2*12},
		// Attention 4, its biases 3, its norms 2; layer 0's dense FFN 3,
		// layer 1's router, its bias, 3 expert stacks and a 3-matrix shared
		// expert; the MTP block (layer 2) as layer 1 plus its projection
		// and 3 norms.
		"glm4moe": {[]string{"blk.0.ffn_up.weight", "blk.1.exp_probs_b.bias", "blk.1.ffn_up_shexp.weight",
			"blk.2.nextn.eh_proj.weight", "blk.2.nextn.hnorm.weight", "blk.2.ffn_gate_inp.weight"}, 2 + 12 + 17 + 21},
	}
	for _, arch := range ArchNames() {
		t.Run(arch, func(t *testing.T) {
			f, err := gguf.Open(write(t, Options{Shape: s, Seed: 1, Arch: arch}))
			if err != nil {
				t.Fatal(err)
			}
			name := arches[arch].name // a variant (qwen35mtp) writes its family's
			if a, _ := f.String("general.architecture"); a != name {
				t.Fatalf("architecture %q, want %q", a, name)
			}
			mtp, _ := f.Uint32(name + ".nextn_predict_layers")
			if n, ok := f.Uint32(name + ".block_count"); !ok || n != 2+mtp {
				t.Errorf("%s.block_count = %d, %v (MTP blocks %d)", name, n, ok, mtp)
			}
			if want := uint32(arches[arch].mtpLayers); mtp != want {
				t.Errorf("%s.nextn_predict_layers = %d, want %d", name, mtp, want)
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

// A hybrid's layers alternate as llama.cpp derives them from
// full_attention_interval: three gated delta nets, then attention; each
// layer carries the tensors of its kind and no other.
func TestHybridLayers(t *testing.T) {
	s, err := ShapeByName("small")
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = 0 // the built-in vocabulary unpadded: a smaller file
	recurrent, err := RecurrentLayers("qwen35", s)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, false, true, true, true, false}
	if !slices.Equal(recurrent, want) {
		t.Fatalf("recurrent layers %v, want %v", recurrent, want)
	}
	if r, _ := RecurrentLayers("qwen3moe", s); r != nil {
		t.Errorf("qwen3moe has recurrent layers %v", r)
	}
	f, err := gguf.Open(write(t, Options{Shape: s, Seed: 1, Arch: "qwen35"}))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Uint32("qwen35.full_attention_interval"); n != 4 {
		t.Errorf("full_attention_interval %d, want 4", n)
	}
	for l, rec := range recurrent {
		_, hasConv := f.Tensor(fmt.Sprintf("blk.%d.ssm_conv1d.weight", l))
		_, hasQ := f.Tensor(fmt.Sprintf("blk.%d.attn_q.weight", l))
		if hasConv != rec || hasQ == rec {
			t.Errorf("layer %d (recurrent %v): ssm_conv1d %v, attn_q %v", l, rec, hasConv, hasQ)
		}
	}
	q, _ := f.Tensor("blk.3.attn_q.weight")
	if q.Dims[1] != uint64(2*s.Embd) {
		t.Errorf("attention Q width %d, want %d (query and gate)", q.Dims[1], 2*s.Embd)
	}
}

// Shapes an architecture cannot be written at are refused by name.
func TestArchitectureShapeLimits(t *testing.T) {
	odd := Shape{Name: "odd", Embd: 96, Layers: 2, Heads: 3, KVHeads: 1, FFN: 256, Ctx: 512}
	if err := Write(t.TempDir()+"/x.gguf", Options{Shape: odd, Arch: "qwen35"}); err == nil || !strings.Contains(err.Error(), "even head count") {
		t.Errorf("qwen35 with 3 heads: %v", err)
	}
	narrow := Shape{Name: "narrow", Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96, Ctx: 512}
	if err := Write(t.TempDir()+"/x.gguf", Options{Shape: narrow, Arch: "qwen3moe"}); err == nil || !strings.Contains(err.Error(), "expert") {
		t.Errorf("qwen3moe with FFN 96: %v", err)
	}
}
