package cgo

import (
	"errors"
	"math"
	"path/filepath"
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
