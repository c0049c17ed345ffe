package task

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/media/mediatest"
)

// fakeProjector splits the text at its markers: each text part is one
// token per byte, each image 3 rows named by its digest.
type fakeProjector struct {
	calls       int
	blind, deaf bool
	refused     string // AudioRefused (deaf too when set)
}

type fakeChunks struct {
	chunks  []MediaChunk
	freed   bool
	encoded []int
}

func (f *fakeProjector) Marker() string { return "<img>" }

func (f *fakeProjector) Modalities() (vision, audio bool) {
	return !f.blind, !f.deaf && f.refused == ""
}

func (f *fakeProjector) AudioRefused() string { return f.refused }

// AudioWindowRows: a 30-second window is 1,000 rows, so 4 minutes of audio
// are past a 4,096-token context.
func (f *fakeProjector) AudioWindowRows() int { return 1000 }

func (f *fakeProjector) TokenizeMedia(text string, images [][]byte, _ bool) (MediaChunks, error) {
	f.calls++
	parts := strings.Split(text, "<img>")
	if len(parts) != len(images)+1 {
		return nil, &engine.Error{Status: engine.StatusInvalid, Msg: "markers do not match the images"}
	}
	fc := &fakeChunks{}
	for i, p := range parts {
		if p != "" {
			var toks []engine.Token
			for _, b := range []byte(p) {
				toks = append(toks, engine.Token(b))
			}
			fc.chunks = append(fc.chunks, MediaChunk{Tokens: toks})
		}
		if i < len(images) {
			d := sha256.Sum256(images[i])
			fc.chunks = append(fc.chunks, MediaChunk{Rows: 3, Digest: hex.EncodeToString(d[:])})
		}
	}
	return fc, nil
}

func (c *fakeChunks) Chunks() []MediaChunk { return c.chunks }
func (c *fakeChunks) Encode(i int) ([]float32, error) {
	c.encoded = append(c.encoded, i)
	return make([]float32, 3*4), nil
}
func (c *fakeChunks) Free() { c.freed = true }

func pngBytes(t *testing.T) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A prompt with an image becomes its text tokens around placeholders at
// the image's rows, with a span keyed by the image's digest whose Encode
// reaches the projector's chunk; bad images are a 400 naming the field
// before the projector sees them.
func TestNewMediaPrompt(t *testing.T) {
	proj := &fakeProjector{}
	m := &Model{Name: "m", Desc: &engine.Descriptor{Ctx: 4096, Vocab: 300}, Media: proj}
	img := pngBytes(t)
	p, err := NewMediaPrompt(m, "images", "ab<img>cd", [][]byte{img}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []engine.Token{'a', 'b', 0, 0, 0, 'c', 'd'}; !slices.Equal(p.Prompt, want) {
		t.Errorf("prompt %v, want %v", p.Prompt, want)
	}
	if len(p.Spans) != 1 || p.Spans[0].At != 2 || p.Spans[0].N != 3 || p.Spans[0].Digest != sha256.Sum256(img) || p.Rows != 3 {
		t.Fatalf("spans %+v rows %d", p.Spans, p.Rows)
	}
	if _, err := p.Spans[0].Encode(); err != nil {
		t.Fatal(err)
	}
	fc := p.chunks.(*fakeChunks)
	if !slices.Equal(fc.encoded, []int{1}) {
		t.Errorf("encoded chunks %v, want [1]", fc.encoded)
	}
	p.Close()
	if !fc.freed {
		t.Error("Close did not free the chunks")
	}

	calls := proj.calls
	deaf := &Model{Name: "m", Desc: m.Desc, Media: &fakeProjector{deaf: true}}
	many := make([][]byte, 33)
	for i := range many {
		many[i] = img
	}
	for _, c := range []struct {
		name   string
		m      *Model
		text   string
		images [][]byte
		want   string
	}{
		{"no projector", &Model{Name: "m", Desc: m.Desc}, "<img>x", [][]byte{img}, "no projector"},
		{"audio to a model without ears", deaf, "<img>x", [][]byte{mediatest.SineWAV(1, 440, 16000)}, "no audio encoder"},
		{"audio to a model whose ears would abort", &Model{Name: "m", Desc: m.Desc, Media: &fakeProjector{refused: "its stack is 8"}}, "<img>x", [][]byte{mediatest.SineWAV(1, 440, 16000)}, "no audio encoder it can use: its stack is 8"},
		{"an image to a model without eyes", &Model{Name: "m", Desc: m.Desc, Media: &fakeProjector{blind: true}}, "<img>x", [][]byte{img}, "no vision encoder"},
		{"hours of audio", m, "<img>x", [][]byte{mediatest.WAV(make([]int16, 31*60*1000), 1000, 1)}, "at most 30m0s"},
		{"not an image", m, "<img>x", [][]byte{[]byte("GIF? no")}, "magic"},
		{"too many", m, strings.Repeat("<img>", 33) + "x", many, "at most 32"},
		{"ends with the image", m, "x<img>", [][]byte{img}, "ends with an image"},
		{"markers", m, "x", [][]byte{img}, "markers"},
	} {
		_, err := NewMediaPrompt(c.m, "images", c.text, c.images, false)
		var te *Error
		if !errors.As(err, &te) || te.Kind != Invalid || te.Param != "images" || !strings.Contains(te.Msg, c.want) {
			t.Errorf("%s: %v, want a 400 on images saying %q", c.name, err, c.want)
		}
	}
	// Audio whose windows alone pass the context: refused naming the field
	// before the projector decodes it.
	_, err = NewMediaPrompt(m, "images", "<img>x", [][]byte{mediatest.WAV(make([]int16, 4*60*1000), 1000, 1)}, false)
	var te *Error
	if !errors.As(err, &te) || te.Kind != ContextExceeded || te.Param != "images" || !strings.Contains(te.Msg, "at least 8000 rows") {
		t.Errorf("4 minutes of audio: %v, want the context exceeded on images", err)
	}
	if proj.calls != calls+2 {
		t.Errorf("the projector ran %d times for the refusals, want only for the last two", proj.calls-calls)
	}
}

// An audio file's windows share its digest; the cache keys the first by
// the digest itself (as an image) and each later one by its own key.
func TestChunkKey(t *testing.T) {
	d := sha256.Sum256([]byte("audio"))
	h := hex.EncodeToString(d[:])
	k0, ok0 := chunkKey(MediaChunk{Rows: 1, Digest: h})
	k1, ok1 := chunkKey(MediaChunk{Rows: 1, Digest: h, Segment: 1})
	k2, ok2 := chunkKey(MediaChunk{Rows: 1, Digest: h, Segment: 2})
	if !ok0 || !ok1 || !ok2 || k0 != d || k1 == d || k2 == k1 || k2 == d {
		t.Fatalf("keys %x %x %x", k0, k1, k2)
	}
	if again, _ := chunkKey(MediaChunk{Digest: h, Segment: 1}); again != k1 {
		t.Error("a segment's key changed")
	}
	if _, ok := chunkKey(MediaChunk{Digest: "nope"}); ok {
		t.Error("a digest that is not hex was taken")
	}
}

// audioWindows counts as mtmd's Whisper preprocessing cuts: audio padded
// with 30 seconds of silence, whole windows kept; never more.
func TestAudioWindows(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{time.Second, 1}, {29 * time.Second, 1}, {30500 * time.Millisecond, 1}, {31 * time.Second, 2}, {45 * time.Second, 2}, {30 * time.Minute, 60}} {
		if got := audioWindows(c.d); got != c.want {
			t.Errorf("%s: %d windows, want %d", c.d, got, c.want)
		}
	}
}
