package cgo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

// mmprojFor writes (once) a synthetic vision projector for the named shape.
func mmprojFor(t testing.TB, shapeName string) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := "mmproj:" + shapeName
	if p, ok := modelMemo[key]; ok {
		return p
	}
	shape, err := synth.ShapeByName(shapeName)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "mmproj-"+shapeName+".gguf")
	if err := synth.WriteMMProj(path, synth.MMProjOptions{Shape: shape, Arch: "llama", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// testPNG encodes a w×h gradient whose colours depend on seed.
func testPNG(t testing.TB, w, h int, seed uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x*7) + seed, uint8(y*5) ^ seed, seed * 3, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func openMedia(t *testing.T) (*Engine, *Media) {
	t.Helper()
	e, err := Open(Options{ModelPath: tinyModel(t), Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.OpenMedia(mmprojFor(t, "tiny"), 1)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); e.Close() })
	return e, m
}

// A prompt with one image marker tokenizes into text, the image's rows
// (one per patch, at as many positions, named by the file's SHA-256) and
// text; the text chunks are the engine's own tokenization of the text
// around the marker; encoding gives Rows × Width finite rows, the same
// rows every time, and another image gives other rows.
func TestMediaTokenizeEncode(t *testing.T) {
	e, m := openMedia(t)
	if m.Width() != 64 {
		t.Fatalf("width %d, want the tiny model's 64", m.Width())
	}
	img := testPNG(t, 40, 30, 1)
	p, err := m.Tokenize("look: "+m.Marker()+" what is it?", [][]byte{img}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	kinds := []MediaKind{}
	for _, c := range p.Chunks {
		kinds = append(kinds, c.Kind)
	}
	if !slices.Equal(kinds, []MediaKind{MediaText, MediaImage, MediaText}) {
		t.Fatalf("chunk kinds %v", kinds)
	}
	im := p.Chunks[1]
	sum := sha256.Sum256(img)
	if im.Rows != synth.MMProjImageTokens || im.Pos != im.Rows || im.Digest != hex.EncodeToString(sum[:]) {
		t.Errorf("image chunk rows %d pos %d digest %q; want %d rows at as many positions, digest %x", im.Rows, im.Pos, im.Digest, synth.MMProjImageTokens, sum)
	}
	before, err := e.Tokenize("look: ", false, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Chunks[0].Tokens, before) {
		t.Errorf("text before the image %v, want %v", p.Chunks[0].Tokens, before)
	}
	rows, err := m.Encode(p, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != im.Rows*m.Width() {
		t.Fatalf("%d floats, want %d", len(rows), im.Rows*m.Width())
	}
	var norm float64
	for _, v := range rows {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("a non-finite value in the rows")
		}
		norm += float64(v) * float64(v)
	}
	if norm == 0 {
		t.Fatal("all rows zero")
	}
	again, err := m.Encode(p, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows, again) {
		t.Error("encoding the same image twice gave different rows")
	}
	q, err := m.Tokenize(m.Marker(), [][]byte{testPNG(t, 40, 30, 9)}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Free()
	other, err := m.Encode(q, slices.IndexFunc(q.Chunks, func(c MediaChunk) bool { return c.Kind == MediaImage }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(rows, other) {
		t.Error("another image gave the same rows")
	}
}

// Bad input is an error with a status, never an abort: bytes that are no
// image, a truncated file, markers that do not match the images, a text
// chunk to encode, a projector for another model's width.
func TestMediaRefusals(t *testing.T) {
	e, m := openMedia(t)
	img := testPNG(t, 16, 16, 2)
	cases := []struct {
		name   string
		text   string
		images [][]byte
	}{
		{"not an image", m.Marker(), [][]byte{[]byte("definitely not a picture")}},
		{"truncated", m.Marker(), [][]byte{img[:len(img)/2]}},
		{"empty", m.Marker(), [][]byte{{}}},
		{"more markers", m.Marker() + m.Marker(), [][]byte{img}},
		{"fewer markers", "no marker", [][]byte{img}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := m.Tokenize(c.text, c.images, false)
			var ee *engine.Error
			if err == nil || !errors.As(err, &ee) || ee.Status != engine.StatusInvalid {
				if p != nil {
					p.Free()
				}
				t.Fatalf("err %v, want a StatusInvalid engine error", err)
			}
		})
	}
	p, err := m.Tokenize("text "+m.Marker(), [][]byte{img}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	if _, err := m.Encode(p, 0, nil); err == nil {
		t.Error("encoding a text chunk succeeded")
	}
	if _, err := e.OpenMedia(mmprojFor(t, "small"), 1); err == nil {
		t.Error("a projector for another width was loaded")
	}
	if _, err := e.OpenMedia(tinyModel(t), 1); err == nil {
		t.Error("a text model was loaded as a projector")
	}
	m.Close()
	if _, err := m.Tokenize(m.Marker(), [][]byte{img}, false); !errors.Is(err, errClosed) {
		t.Errorf("tokenize after close: %v", err)
	}
}
