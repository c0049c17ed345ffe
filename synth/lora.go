package synth

import (
	"fmt"

	"superfluid/gguf"
)

// A LoRA adapter for a synthetic model, as llama.cpp's adapter loader
// (llama-adapter.cpp) reads one: general.type "adapter", the base model's
// general.architecture, adapter.type "lora", adapter.lora.alpha, and for
// each adapted matrix W {in, out} a pair W.lora_a {in, rank} and W.lora_b
// {rank, out}; llama.cpp adds scale × alpha/rank × B·A·x to W·x.
//
// The pair's weights are as random as the base's, at the scale of one of
// its matrices (A at 1/sqrt(in), B at 1/sqrt(rank), alpha = rank), so at
// scale 1 the adapter changes every adapted projection by as much as the
// projection itself: greedy output differs from the base model's within a
// few tokens, and at scale 0 the adapter is not applied at all.

// LoRAOptions select the adapter WriteLoRA generates.
type LoRAOptions struct {
	// Shape and Arch are the base model's (Options.Shape, Options.Arch).
	Shape Shape
	Arch  string
	// Rank is the pairs' inner width (default 8).
	Rank int
	// Seed draws the adapter's weights; adapters of one base with
	// different seeds differ.
	Seed uint64
}

// loraTargets are the matrices of every layer the adapter changes.
var loraTargets = []struct {
	name    string
	in, out func(s Shape) int
}{
	{"attn_q", func(s Shape) int { return s.Embd }, func(s Shape) int { return s.Embd }},
	{"attn_v", func(s Shape) int { return s.Embd }, func(s Shape) int { return s.KVDim() }},
	{"ffn_up", func(s Shape) int { return s.Embd }, func(s Shape) int { return s.FFN }},
}

// WriteLoRA writes the adapter to path atomically; the same options always
// produce byte-identical files.
func WriteLoRA(path string, o LoRAOptions) error {
	s := o.Shape
	if err := s.Validate(); err != nil {
		return err
	}
	a, err := archByName(o.Arch)
	if err != nil {
		return err
	}
	if a.block != nil {
		return fmt.Errorf("synth: adapters are written for the llama layout (llama, qwen2, qwen3), not %s", a.name)
	}
	rank := o.Rank
	if rank == 0 {
		rank = 8
	}
	if rank < 1 || rank > s.Embd {
		return fmt.Errorf("synth: LoRA rank %d outside [1, %d]", rank, s.Embd)
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", a.name)
	w.Set("general.type", "adapter")
	w.Set("general.name", fmt.Sprintf("superfluid-synth-%s-lora", s.Name))
	w.Set(gguf.KeyAlignment, uint32(gguf.DefaultAlignment))
	w.Set("adapter.type", "lora")
	w.Set("adapter.lora.alpha", float32(rank))
	w.Set("superfluid.synth.seed", o.Seed)
	g := gen{seed: o.Seed ^ 0x10fa, typ: gguf.F16}
	for l := 0; l < s.Layers; l++ {
		for _, t := range loraTargets {
			name := fmt.Sprintf("blk.%d.%s.weight", l, t.name)
			in, out := t.in(s), t.out(s)
			w.AddTensor(g.matrix(name+".lora_a", in, rank, inv(in), nil))
			w.AddTensor(g.matrix(name+".lora_b", rank, out, inv(rank), nil))
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}
