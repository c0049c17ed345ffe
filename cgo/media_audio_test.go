package cgo

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/media/mediatest"
	"superfluid/synth"
)

// audioProjFor writes (once) a synthetic projector with the given
// modality (synth.ModalityAudio or synth.ModalityBoth) for the shape.
func audioProjFor(t testing.TB, shapeName, modality string) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := "mmproj:" + modality + ":" + shapeName
	if p, ok := modelMemo[key]; ok {
		return p
	}
	shape, err := synth.ShapeByName(shapeName)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "mmproj-"+modality+"-"+shapeName+".gguf")
	if err := synth.WriteMMProj(path, synth.MMProjOptions{Shape: shape, Arch: "llama", Seed: 3, Modality: modality}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

func openAudioMedia(t *testing.T, modality string) *Media {
	t.Helper()
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.OpenMedia(audioProjFor(t, "tiny", modality), 1)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); e.Close() })
	return m
}

// An audio projector loads, says it hears and does not see, decodes a WAV
// into one 30-second window of synth.MMProjAudioTokens rows (segment 0,
// named by the file's SHA-256), encodes it into finite rows, and refuses an
// image by what it lacks.
func TestMediaAudio(t *testing.T) {
	m := openAudioMedia(t, synth.ModalityAudio)
	if !m.Audio() || m.Vision() || m.AudioRate() != 16000 || m.AudioWindowRows() != synth.MMProjAudioTokens {
		t.Fatalf("audio %v vision %v rate %d window rows %d", m.Audio(), m.Vision(), m.AudioRate(), m.AudioWindowRows())
	}
	wav := mediatest.SineWAV(2, 440, 16000)
	p, err := m.Tokenize("hear "+m.Marker()+" now", [][]byte{wav}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	var audio []MediaChunk
	at := -1
	for i, c := range p.Chunks {
		if c.Kind == MediaAudio {
			audio = append(audio, c)
			at = i
		}
	}
	if len(audio) != 1 || audio[0].Rows != synth.MMProjAudioTokens || audio[0].Segment != 0 || len(audio[0].Digest) != 64 {
		t.Fatalf("audio chunks %+v", audio)
	}
	rows, err := m.Encode(p, at, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != synth.MMProjAudioTokens*m.Width() {
		t.Fatalf("%d floats", len(rows))
	}
	for _, v := range rows {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("a non-finite row value")
		}
	}
	_, err = m.Tokenize(m.Marker(), [][]byte{testPNG(t, 20, 20, 1)}, true)
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Status != engine.StatusUnsupported {
		t.Fatalf("an image to an audio projector: %v", err)
	}
}

// Audio longer than one window is a chunk per window, numbered by segment
// under the file's one digest; the same file twice numbers each copy's
// windows from 0 again; a file too short to preprocess is refused.
func TestMediaAudioSegments(t *testing.T) {
	m := openAudioMedia(t, synth.ModalityBoth)
	if !m.Audio() || !m.Vision() {
		t.Fatalf("both: audio %v vision %v", m.Audio(), m.Vision())
	}
	long := mediatest.SineWAV(45, 220, 16000)
	mk := m.Marker()
	p, err := m.Tokenize("a "+mk+mk+" b "+mk+" c", [][]byte{long, long, testPNG(t, 20, 20, 2)}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	var segs []int
	for _, c := range p.Chunks {
		switch c.Kind {
		case MediaAudio:
			segs = append(segs, c.Segment)
		case MediaImage:
			segs = append(segs, 100+c.Segment)
		}
	}
	if want := []int{0, 1, 0, 1, 100}; !equalInts(segs, want) {
		t.Fatalf("segments %v, want %v", segs, want)
	}
	_, err = m.Tokenize(mk, [][]byte{mediatest.WAV(make([]int16, 10), 16000, 1)}, true)
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Status != engine.StatusInvalid {
		t.Fatalf("10 samples: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The cost of audio on the synthetic projector: decoding and preprocessing
// 30 seconds of WAV (miniaudio, the log-mel spectrogram) and encoding its
// window into rows (the Whisper tower and projector). Reported per window.
func BenchmarkAudioWindow(b *testing.B) {
	e, err := Open(Options{ModelPath: tinyModel(b), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	m, err := e.OpenMedia(audioProjFor(b, "tiny", synth.ModalityAudio), 2)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	wav := mediatest.SineWAV(29, 440, 16000)
	b.Run("tokenize", func(b *testing.B) {
		for range b.N {
			p, err := m.Tokenize(m.Marker()+" x", [][]byte{wav}, true)
			if err != nil {
				b.Fatal(err)
			}
			p.Free()
		}
	})
	p, err := m.Tokenize(m.Marker()+" x", [][]byte{wav}, true)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Free()
	at := -1
	for i, c := range p.Chunks {
		if c.Kind == MediaAudio {
			at = i
		}
	}
	b.Run("encode", func(b *testing.B) {
		for range b.N {
			if _, err := m.Encode(p, at, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(p.Chunks[at].Rows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// audioProjStack writes (once) a synthetic projector of the modality
// (audio or both) stacking stack encoder frames a row.
func audioProjStack(t testing.TB, modality string, stack int) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := fmt.Sprintf("mmproj:%s:stack%d", modality, stack)
	if p, ok := modelMemo[key]; ok {
		return p
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, fmt.Sprintf("mmproj-%s-stack%d-tiny.gguf", modality, stack))
	if err := synth.WriteMMProj(path, synth.MMProjOptions{Shape: shape, Arch: "llama", Seed: 3, Modality: modality, AudioStack: stack}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// The guard's mirror of mtmd's two formulas for a window's rows, over the
// one frame count a Whisper-family window has (3,000: mtmd pads the last
// window and drops a shorter tail), for each type it covers: Ultravox's
// own stack of 8 (and Meralion's, Voxtral's pooled 4) disagree by a row,
// stacks dividing the 1,500 encoder frames agree, a stack of 0 cannot be
// counted, and a type outside the family is not mirrored.
func TestAudioWindowRowsFormulas(t *testing.T) {
	if !upstreamLlama {
		t.Skip("no mtmd in this build")
	}
	cases := []struct {
		proj           string
		stack          int
		counted, built int
	}{
		{"ultravox", 8, 187, 188},
		{"ultravox", 7, 214, 215},
		{"ultravox", 10, 150, 150},
		{"ultravox", 16, 94, 94},
		{"ultravox", 5, 300, 300},
		{"ultravox", 1, 1500, 1500},
		{"ultravox", 0, -1, 1500},
		{"meralion", 8, 187, 188},
		{"voxtral", 4, 187, 188},
		{"voxtral", 5, 150, 150},
		{"qwen2a", 0, 750, 750},
		{"qwen2.5o", 0, 750, 750},
		{"musicflamingo", 0, 750, 750},
		{"glma", 4, 377, 377},
		{"glma", 8, 189, 190},
		{"glma", 0, -1, 1502},
	}
	for _, c := range cases {
		counted, built, ok := audioWindowRowsFor(c.proj, c.stack, 3000)
		if !ok || counted != c.counted || built != c.built {
			t.Errorf("%s stack %d: counted %d built %d (mirrored %v), want %d and %d", c.proj, c.stack, counted, built, ok, c.counted, c.built)
		}
	}
	// An odd frame count: the convolution makes a row more than the
	// learned positions mtmd adds (its graph would assert).
	if _, built, _ := audioWindowRowsFor("ultravox", 10, 2999); built != -1 {
		t.Errorf("2999 frames: built %d, want -1", built)
	}
	for _, p := range []string{"mlp", "qwen3a", "lfm2a", "nonsense"} {
		if _, _, ok := audioWindowRowsFor(p, 8, 3000); ok {
			t.Errorf("%s is mirrored", p)
		}
	}
}

// The mirror against mtmd itself, on synthetic Ultravox projectors of
// several stacks: where the formulas agree the projector hears, mtmd's own
// count of a window is the mirrored one and an encode makes that many
// rows (the graph's, or mtmd would have aborted); where they disagree (7,
// 8) audio is refused at load, saying why, and a WAV is refused by
// Tokenize before mtmd could encode it.
func TestAudioWindowRowsMirror(t *testing.T) {
	if !upstreamLlama {
		t.Skip("no mtmd in this build")
	}
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	wav := mediatest.SineWAV(2, 440, 16000)
	for _, stack := range []int{2, 5, 7, 8, 10, 16} {
		m, err := e.OpenMedia(audioProjStack(t, synth.ModalityAudio, stack), 1)
		if err != nil {
			t.Fatalf("stack %d: %v", stack, err)
		}
		counted, built, _ := audioWindowRowsFor("ultravox", stack, 3000)
		if counted != built {
			if m.Audio() || m.AudioWindowRows() != 0 || !strings.Contains(m.AudioRefused(), fmt.Sprintf("%d rows while its graph makes %d", counted, built)) {
				t.Errorf("stack %d: audio %v, window rows %d, refused %q", stack, m.Audio(), m.AudioWindowRows(), m.AudioRefused())
			}
			_, err := m.Tokenize(m.Marker(), [][]byte{wav}, true)
			var ee *engine.Error
			if !errors.As(err, &ee) || ee.Status != engine.StatusUnsupported || !strings.Contains(ee.Msg, "mtmd aborts") {
				t.Errorf("stack %d: a WAV: %v", stack, err)
			}
			m.Close()
			continue
		}
		if !m.Audio() || m.AudioRefused() != "" || m.AudioWindowRows() != counted {
			t.Errorf("stack %d: audio %v, refused %q, mtmd counts %d rows, the mirror %d", stack, m.Audio(), m.AudioRefused(), m.AudioWindowRows(), counted)
		}
		p, err := m.Tokenize(m.Marker(), [][]byte{wav}, true)
		if err != nil {
			t.Fatalf("stack %d: %v", stack, err)
		}
		for i, c := range p.Chunks {
			if c.Kind != MediaAudio {
				continue
			}
			rows, err := m.Encode(p, i, nil)
			if err != nil || len(rows) != built*m.Width() {
				t.Errorf("stack %d: encoded %d floats (%v), want %d rows", stack, len(rows), err, built)
			}
		}
		p.Free()
		m.Close()
	}
	// Both encoders, audio stacking 8: the audio is refused, the images
	// are still seen and encoded.
	m, err := e.OpenMedia(audioProjStack(t, synth.ModalityBoth, 8), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Audio() || !m.Vision() || m.AudioRefused() == "" {
		t.Fatalf("both, stack 8: audio %v vision %v refused %q", m.Audio(), m.Vision(), m.AudioRefused())
	}
	p, err := m.Tokenize(m.Marker()+" x", [][]byte{testPNG(t, 20, 20, 1)}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	images := 0
	for i, c := range p.Chunks {
		if c.Kind != MediaImage {
			continue
		}
		images++
		if rows, err := m.Encode(p, i, nil); err != nil || len(rows) != synth.MMProjImageTokens*m.Width() {
			t.Errorf("both, stack 8: the image encoded %d floats (%v)", len(rows), err)
		}
	}
	if images != 1 {
		t.Errorf("both, stack 8: %d image chunks", images)
	}
}
