package synth

import (
	"fmt"

	"superfluid/gguf"
)

// An audio encoder for a synthetic model, as mtmd loads one: projector
// type "ultravox" — a Whisper encoder (two 1-D convolutions over the log-mel
// spectrogram, the second with stride 2, learned positions, pre-norm blocks
// of attention and an erf-GELU FFN, a final norm) whose output frames are
// stacked MMProjAudioStack at a time and projected by RMS-norm, a SwiGLU
// matrix, RMS-norm and a matrix into the text model's width. It is the
// plainest audio projector mtmd accepts that feeds sequential positions,
// so it pairs with the llama, qwen2 and qwen3 text models like the vision
// one; stacking keeps an audio's rows few (fewer than QWEN2A's pooling).
//
// mtmd cuts audio into 30-second windows of 3,000 mel frames, padding the
// last: each window is MMProjAudioTokens rows. The tower is tiny (width
// 32, 2 layers, 80 mel bins), weights random at 1/sqrt(fan-in), F32.

// The audio encoder's geometry.
const (
	// MMProjAudioStack is how many encoder frames make one row. It divides
	// a window's 1,500 encoder frames: mtmd counts a window's rows as
	// 3,000 / stack / 2 while the graph pads 1,500 frames up to a multiple
	// of the stack, and aborts when the two differ (Ultravox's own 8 does:
	// 187 against 188).
	MMProjAudioStack = 10
	// MMProjAudioTokens is the rows of one 30-second window: 3,000 mel
	// frames, stacked (375), halved by the strided convolution.
	MMProjAudioTokens = 3000 / MMProjAudioStack / 2
	// mmprojAudioMels is the mel bins the spectrogram has (Whisper's 80).
	mmprojAudioMels = 80
	// mmprojAudioPositions is the encoder's learned positions: a window's
	// 1,500 frames after the strided convolution.
	mmprojAudioPositions = 1500
	// mmprojAudioHidden is the SwiGLU's width inside the projector.
	mmprojAudioHidden = 64
)

// writeAudio adds the audio encoder stacking stack frames a row; only as
// writeVision's.
func writeAudio(w *gguf.Writer, s Shape, seed uint64, stack int, only bool) {
	w.Set("clip.has_audio_encoder", true)
	if only {
		w.Set("clip.projector_type", "ultravox")
	} else {
		w.Set("clip.audio.projector_type", "ultravox")
	}
	w.Set("clip.audio.num_mel_bins", uint32(mmprojAudioMels))
	w.Set("clip.audio.embedding_length", uint32(mmprojWidth))
	w.Set("clip.audio.feed_forward_length", uint32(mmprojFFN))
	w.Set("clip.audio.block_count", uint32(mmprojLayers))
	w.Set("clip.audio.projection_dim", uint32(s.Embd))
	w.Set("clip.audio.attention.head_count", uint32(mmprojHeads))
	w.Set("clip.audio.attention.layer_norm_epsilon", float32(1e-5))
	w.Set("clip.audio.projector.stack_factor", uint32(stack))

	g := gen{seed: seed ^ 0xa0d10, typ: gguf.F32}
	// The convolutions' kernels {width 3, in channels, out channels} and
	// biases {1, channels} (broadcast over the frames).
	conv := func(name string, in int) {
		k := g.matrix(name+".weight", 3*in, mmprojWidth, inv(3*in), nil)
		k.Shape = []uint64{3, uint64(in), mmprojWidth}
		w.AddTensor(k)
		b := filled(name+".bias", mmprojWidth, 0)
		b.Shape = []uint64{1, mmprojWidth}
		w.AddTensor(b)
	}
	conv("a.conv1d.1", mmprojAudioMels)
	conv("a.conv1d.2", mmprojWidth)
	w.AddTensor(g.matrix("a.position_embd.weight", mmprojWidth, mmprojAudioPositions, 0.02, nil))
	for l := 0; l < mmprojLayers; l++ {
		p := fmt.Sprintf("a.blk.%d.", l)
		for _, n := range []string{"ln1", "ln2"} {
			w.AddTensor(ones(p+n+".weight", mmprojWidth))
			w.AddTensor(filled(p+n+".bias", mmprojWidth, 0))
		}
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			w.AddTensor(g.matrix(p+n+".weight", mmprojWidth, mmprojWidth, inv(mmprojWidth), nil))
			if n != "attn_k" { // Whisper's key projection has no bias
				w.AddTensor(filled(p+n+".bias", mmprojWidth, 0))
			}
		}
		w.AddTensor(g.matrix(p+"ffn_up.weight", mmprojWidth, mmprojFFN, inv(mmprojWidth), nil))
		w.AddTensor(filled(p+"ffn_up.bias", mmprojFFN, 0))
		w.AddTensor(g.matrix(p+"ffn_down.weight", mmprojFFN, mmprojWidth, inv(mmprojFFN), nil))
		w.AddTensor(filled(p+"ffn_down.bias", mmprojWidth, 0))
	}
	w.AddTensor(ones("a.post_ln.weight", mmprojWidth))
	w.AddTensor(filled("a.post_ln.bias", mmprojWidth, 0))
	// The projector: RMS-norm over the stacked frames, a SwiGLU (one matrix
	// giving both halves), RMS-norm, then into the text model's width.
	stacked := mmprojWidth * stack
	w.AddTensor(ones("mm.a.norm_pre.weight", stacked))
	w.AddTensor(g.matrix("mm.a.mlp.1.weight", stacked, 2*mmprojAudioHidden, inv(stacked), nil))
	w.AddTensor(ones("mm.a.norm_mid.weight", mmprojAudioHidden))
	w.AddTensor(g.matrix("mm.a.mlp.2.weight", mmprojAudioHidden, s.Embd, inv(mmprojAudioHidden), nil))
}
