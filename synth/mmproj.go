package synth

import (
	"fmt"

	"superfluid/gguf"
)

// A projector for a synthetic model: its vision encoder here, its audio
// encoder in mmproj_audio.go (MMProjOptions.Modality picks). The vision
// encoder, as llama.cpp's mtmd (clip.cpp) loads one: the LLaVA layout,
// projector type "mlp" — a ViT over patch_size² pixel patches (a strided convolution, learned positions,
// pre-norm blocks of attention and a GELU FFN) whose second-to-last layer
// feeds a two-matrix MLP (mm.0, GELU, mm.2) into the text model's embedding
// width. It is the simplest projector mtmd accepts that gives one embedding
// row per patch at plain sequential positions (no M-RoPE), so it pairs with
// the llama, qwen2 and qwen3 text models.
//
// The vision tower is tiny (width 32, 2 layers, MMProjImageSize² pixels in
// MMProjPatchSize² patches), so encoding an image costs milliseconds and a
// test's image is MMProjImageTokens prompt rows. Weights are random at each
// matrix's 1/sqrt(fan-in) scale and stored F32: the file is a few hundred
// kilobytes.

// The projector's geometry: every image is resized to MMProjImageSize
// square and becomes MMProjImageTokens embedding rows.
const (
	MMProjImageSize   = 112
	MMProjPatchSize   = 14
	MMProjImageTokens = (MMProjImageSize / MMProjPatchSize) * (MMProjImageSize / MMProjPatchSize)
)

// The vision tower's own sizes.
const (
	mmprojWidth  = 32
	mmprojHeads  = 2
	mmprojFFN    = 64
	mmprojLayers = 2
)

// The encoders a projector file carries (MMProjOptions.Modality). One
// file may carry both, as llama.cpp's omni projectors do: mtmd loads each
// encoder it finds and checks that their output widths agree.
const (
	ModalityVision = "vision"
	ModalityAudio  = "audio"
	ModalityBoth   = "both"
)

// MMProjOptions select the projector WriteMMProj generates.
type MMProjOptions struct {
	// Shape is the text model's (its Embd is the projector's output width).
	Shape Shape
	// Arch is the text model's architecture (llama, qwen2 or qwen3).
	Arch string
	// Seed draws the projector's weights.
	Seed uint64
	// Modality is the encoders written: ModalityVision (the default when
	// empty), ModalityAudio or ModalityBoth.
	Modality string
	// AudioStack is the audio encoder's frame stacking
	// (clip.audio.projector.stack_factor); 0 is MMProjAudioStack. Others
	// exist to test projectors whose stacking mtmd cannot encode (8,
	// Ultravox's own).
	AudioStack int
}

// WriteMMProj writes the projector to path atomically; the same options
// always produce byte-identical files.
func WriteMMProj(path string, o MMProjOptions) error {
	s := o.Shape
	if err := s.Validate(); err != nil {
		return err
	}
	a, err := archByName(o.Arch)
	if err != nil {
		return err
	}
	if a.block != nil || a.name == "gemma4" {
		return fmt.Errorf("synth: projectors are written for the llama layout (llama, qwen2, qwen3), not %s", a.name)
	}
	vision, audio, err := modalities(o.Modality)
	if err != nil {
		return err
	}
	stack := o.AudioStack
	if stack == 0 {
		stack = MMProjAudioStack
	}
	if stack < 1 || stack > 64 {
		return fmt.Errorf("synth: audio stack factor %d: want 1 to 64", stack)
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", "clip")
	w.Set("general.name", fmt.Sprintf("superfluid-synth-%s-mmproj", s.Name))
	w.Set(gguf.KeyAlignment, uint32(gguf.DefaultAlignment))
	w.Set("general.file_type", uint32(0))
	w.Set("superfluid.synth.seed", o.Seed)
	if vision {
		writeVision(w, s, o.Seed, !audio)
	}
	if audio {
		writeAudio(w, s, o.Seed, stack, !vision)
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// modalities reads MMProjOptions.Modality.
func modalities(m string) (vision, audio bool, err error) {
	switch m {
	case "", ModalityVision:
		return true, false, nil
	case ModalityAudio:
		return false, true, nil
	case ModalityBoth:
		return true, true, nil
	}
	return false, false, fmt.Errorf("synth: projector modality %q: want %s, %s or %s", m, ModalityVision, ModalityAudio, ModalityBoth)
}

// writeVision adds the vision encoder; only says it is the file's one
// encoder (clip.projector_type then names its projector for every
// modality, so a file with both names each under its own key).
func writeVision(w *gguf.Writer, s Shape, seed uint64, only bool) {
	w.Set("clip.has_vision_encoder", true)
	if only {
		w.Set("clip.projector_type", "mlp")
	} else {
		w.Set("clip.vision.projector_type", "mlp")
	}
	w.Set("clip.use_gelu", true)
	w.Set("clip.vision.image_size", uint32(MMProjImageSize))
	w.Set("clip.vision.patch_size", uint32(MMProjPatchSize))
	w.Set("clip.vision.embedding_length", uint32(mmprojWidth))
	w.Set("clip.vision.feed_forward_length", uint32(mmprojFFN))
	w.Set("clip.vision.block_count", uint32(mmprojLayers))
	w.Set("clip.vision.projection_dim", uint32(s.Embd))
	w.Set("clip.vision.attention.head_count", uint32(mmprojHeads))
	w.Set("clip.vision.attention.layer_norm_epsilon", float32(1e-5))
	w.Set("clip.vision.image_mean", []float32{0.5, 0.5, 0.5})
	w.Set("clip.vision.image_std", []float32{0.5, 0.5, 0.5})

	g := gen{seed: seed ^ 0x1a6e, typ: gguf.F32}
	patchIn := MMProjPatchSize * MMProjPatchSize * 3
	// The patch convolution's kernel {patch, patch, 3 channels, width}: a
	// matrix of one row per output channel, reshaped.
	patch := g.matrix("v.patch_embd.weight", patchIn, mmprojWidth, inv(patchIn), nil)
	patch.Shape = []uint64{MMProjPatchSize, MMProjPatchSize, 3, mmprojWidth}
	w.AddTensor(patch)
	w.AddTensor(filled("v.patch_embd.bias", mmprojWidth, 0))
	w.AddTensor(g.matrix("v.position_embd.weight", mmprojWidth, MMProjImageTokens, 0.02, nil))
	for l := 0; l < mmprojLayers; l++ {
		p := fmt.Sprintf("v.blk.%d.", l)
		for _, n := range []string{"ln1", "ln2"} {
			w.AddTensor(ones(p+n+".weight", mmprojWidth))
			w.AddTensor(filled(p+n+".bias", mmprojWidth, 0))
		}
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			w.AddTensor(g.matrix(p+n+".weight", mmprojWidth, mmprojWidth, inv(mmprojWidth), nil))
			w.AddTensor(filled(p+n+".bias", mmprojWidth, 0))
		}
		w.AddTensor(g.matrix(p+"ffn_up.weight", mmprojWidth, mmprojFFN, inv(mmprojWidth), nil))
		w.AddTensor(filled(p+"ffn_up.bias", mmprojFFN, 0))
		w.AddTensor(g.matrix(p+"ffn_down.weight", mmprojFFN, mmprojWidth, inv(mmprojFFN), nil))
		w.AddTensor(filled(p+"ffn_down.bias", mmprojWidth, 0))
	}
	// The MLP into the text model's width; its output at the scale of the
	// text model's token embeddings, so an image's rows weigh like words.
	w.AddTensor(g.matrix("mm.0.weight", mmprojWidth, s.Embd, inv(mmprojWidth), nil))
	w.AddTensor(filled("mm.0.bias", s.Embd, 0))
	w.AddTensor(g.matrix("mm.2.weight", s.Embd, s.Embd, inv(s.Embd), nil))
	w.AddTensor(filled("mm.2.bias", s.Embd, 0))
}
