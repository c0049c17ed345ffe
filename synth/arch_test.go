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
