package synth

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"superfluid/gguf"
)

// The projector carries the keys and tensors clip.cpp's loader requires
// for an "mlp" projector, its output width is the text model's, and the
// same seed writes the same bytes (a different one, different weights).
func TestWriteMMProj(t *testing.T) {
	s := tiny(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.mmproj.gguf")
	if err := WriteMMProj(path, MMProjOptions{Shape: s, Arch: "qwen3", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := f.String("general.architecture"); a != "clip" {
		t.Errorf("architecture %q", a)
	}
	if p, _ := f.String("clip.projector_type"); p != "mlp" {
		t.Errorf("projector type %q", p)
	}
	if v, ok := f.Bool("clip.has_vision_encoder"); !v || !ok {
		t.Errorf("has_vision_encoder %v %v", v, ok)
	}
	for k, want := range map[string]uint32{
		"clip.vision.image_size": MMProjImageSize, "clip.vision.patch_size": MMProjPatchSize,
		"clip.vision.embedding_length": mmprojWidth, "clip.vision.block_count": mmprojLayers,
		"clip.vision.projection_dim": uint32(s.Embd), "clip.vision.attention.head_count": mmprojHeads,
		"clip.vision.feed_forward_length": mmprojFFN,
	} {
		if got, ok := f.Uint32(k); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", k, got, ok, want)
		}
	}
	if m, _ := f.Float32s("clip.vision.image_mean"); len(m) != 3 {
		t.Errorf("image_mean %v", m)
	}
	for name, dims := range map[string][]uint64{
		"v.patch_embd.weight":     {MMProjPatchSize, MMProjPatchSize, 3, mmprojWidth},
		"v.position_embd.weight":  {mmprojWidth, MMProjImageTokens},
		"v.blk.1.attn_out.weight": {mmprojWidth, mmprojWidth},
		"v.blk.0.ffn_up.weight":   {mmprojWidth, mmprojFFN},
		"v.blk.0.ffn_down.weight": {mmprojFFN, mmprojWidth},
		"mm.0.weight":             {mmprojWidth, uint64(s.Embd)},
		"mm.2.weight":             {uint64(s.Embd), uint64(s.Embd)},
		"mm.2.bias":               {uint64(s.Embd)},
	} {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Errorf("no tensor %s", name)
			continue
		}
		if !slices.Equal(ti.Dims, dims) {
			t.Errorf("%s dims %v, want %v", name, ti.Dims, dims)
		}
	}

	again := filepath.Join(dir, "b.gguf")
	other := filepath.Join(dir, "c.gguf")
	if err := WriteMMProj(again, MMProjOptions{Shape: s, Arch: "qwen3", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := WriteMMProj(other, MMProjOptions{Shape: s, Arch: "qwen3", Seed: 2}); err != nil {
		t.Fatal(err)
	}
	ra, _ := os.ReadFile(path)
	rb, _ := os.ReadFile(again)
	rc, _ := os.ReadFile(other)
	if !bytes.Equal(ra, rb) {
		t.Error("the same seed wrote different bytes")
	}
	if bytes.Equal(ra, rc) {
		t.Error("another seed wrote the same bytes")
	}
}

func TestWriteMMProjRefusesOtherLayouts(t *testing.T) {
	for _, arch := range []string{"gemma4", "qwen35", "qwen3moe"} {
		if err := WriteMMProj(filepath.Join(t.TempDir(), "x.gguf"), MMProjOptions{Shape: tiny(t), Arch: arch}); err == nil {
			t.Errorf("%s: written", arch)
		}
	}
}

// An audio projector names ultravox under the one projector key and carries
// the Whisper tower's and the projector's tensors at the text model's
// width; a file with both encoders names each projector under its own
// modality's key (clip.projector_type would name it for both); an unknown
// modality is refused.
func TestWriteMMProjAudio(t *testing.T) {
	s := tiny(t)
	dir := t.TempDir()
	audio := filepath.Join(dir, "a.gguf")
	if err := WriteMMProj(audio, MMProjOptions{Shape: s, Arch: "qwen3", Seed: 1, Modality: ModalityAudio}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(audio)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := f.String("clip.projector_type"); p != "ultravox" {
		t.Errorf("projector type %q", p)
	}
	if v, ok := f.Bool("clip.has_vision_encoder"); v || ok {
		t.Errorf("an audio projector with has_vision_encoder %v", v)
	}
	for k, want := range map[string]uint32{
		"clip.audio.num_mel_bins": mmprojAudioMels, "clip.audio.projector.stack_factor": MMProjAudioStack,
		"clip.audio.projection_dim": uint32(s.Embd), "clip.audio.block_count": mmprojLayers,
	} {
		if got, ok := f.Uint32(k); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", k, got, ok, want)
		}
	}
	for name, dims := range map[string][]uint64{
		"a.conv1d.1.weight":      {3, mmprojAudioMels, mmprojWidth},
		"a.conv1d.2.bias":        {1, mmprojWidth},
		"a.position_embd.weight": {mmprojWidth, mmprojAudioPositions},
		"mm.a.mlp.1.weight":      {mmprojWidth * MMProjAudioStack, 2 * mmprojAudioHidden},
		"mm.a.mlp.2.weight":      {mmprojAudioHidden, uint64(s.Embd)},
	} {
		ti, ok := f.Tensor(name)
		if !ok || !slices.Equal(ti.Dims, dims) {
			t.Errorf("%s: %v %v, want %v", name, ok, ti.Dims, dims)
		}
	}
	if _, ok := f.Tensor("a.blk.0.attn_k.bias"); ok {
		t.Error("a key bias: mtmd's Whisper graph asserts there is none")
	}

	both := filepath.Join(dir, "b.gguf")
	if err := WriteMMProj(both, MMProjOptions{Shape: s, Arch: "qwen3", Seed: 1, Modality: ModalityBoth}); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(both)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.String("clip.projector_type"); ok {
		t.Error("both: clip.projector_type set")
	}
	v, _ := g.String("clip.vision.projector_type")
	a, _ := g.String("clip.audio.projector_type")
	if v != "mlp" || a != "ultravox" {
		t.Errorf("both: vision %q audio %q", v, a)
	}
	if err := WriteMMProj(filepath.Join(dir, "c.gguf"), MMProjOptions{Shape: s, Arch: "qwen3", Modality: "smell"}); err == nil {
		t.Error("modality smell written")
	}
}

// AudioStack sets the stack factor and the projector's input width with
// it (Ultravox's own 8, which mtmd cannot encode); one out of range is
// refused.
func TestWriteMMProjAudioStack(t *testing.T) {
	s := tiny(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.gguf")
	if err := WriteMMProj(path, MMProjOptions{Shape: s, Arch: "llama", Modality: ModalityAudio, AudioStack: 8}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := f.Uint32("clip.audio.projector.stack_factor"); !ok || got != 8 {
		t.Errorf("stack factor %d, %v", got, ok)
	}
	if ti, ok := f.Tensor("mm.a.mlp.1.weight"); !ok || ti.Dims[0] != mmprojWidth*8 {
		t.Errorf("mm.a.mlp.1.weight %v", ti.Dims)
	}
	for _, bad := range []int{-1, 65} {
		if err := WriteMMProj(filepath.Join(dir, "b.gguf"), MMProjOptions{Shape: s, Arch: "llama", Modality: ModalityAudio, AudioStack: bad}); err == nil {
			t.Errorf("stack %d written", bad)
		}
	}
}
