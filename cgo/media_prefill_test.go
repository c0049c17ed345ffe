package cgo

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"superfluid/engine"
	"superfluid/gguf"
)

// tokenRows reads the model's token embedding rows for toks from its F16
// file: what llama.cpp's graph looks up for a token, as rows.
func tokenRows(t *testing.T, path string, toks []engine.Token) []float32 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor("token_embd.weight")
	if !ok || ti.Type != gguf.F16 {
		t.Fatalf("token_embd.weight %v %v: want F16", ok, ti.Type)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	width := int(ti.Dims[0])
	var rows []float32
	for _, tok := range toks {
		off := int(f.DataOffset) + int(ti.Offset) + int(tok)*width*2
		for i := range width {
			rows = append(rows, halfToFloat(binary.LittleEndian.Uint16(raw[off+2*i:])))
		}
	}
	return rows
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch exp {
	case 0: // subnormal: frac × 2⁻²⁴
		v := float32(math.Ldexp(float64(frac), -24))
		if sign != 0 {
			v = -v
		}
		return v
	case 31:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | frac<<13)
}

// runWithRows admits a greedy lane on prompt, prefills [0, at) as tokens,
// rows (a span of len(rows)/width rows) through PrefillRows, the rest as
// tokens, and decodes n tokens.
func runWithRows(t *testing.T, e *Engine, prompt []engine.Token, at int, rows []float32, n int) []engine.Token {
	t.Helper()
	if err := e.Free(0); err != nil {
		t.Fatal(err)
	}
	span := len(rows) / max(1, e.RowWidth())
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: uint32(n), Sampling: engine.Greedy()}, prompt, nil)
	if at > 0 {
		p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Count: uint32(at)})
	}
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if span > 0 {
		if err := e.PrefillRows(1, rows); err != nil {
			t.Fatal(err)
		}
	}
	p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Offset: uint32(at + span), Count: uint32(len(prompt) - at - span)})
	var out []engine.Token
	for {
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatal(err)
		}
		p.Reset()
		done := false
		for _, te := range ev.Tokens {
			out = append(out, te.Token)
			done = done || te.Finish != engine.FinishNone
		}
		if done {
			p.Retires = append(p.Retires, 1)
			if _, err := e.Tick(&p); err != nil {
				t.Fatal(err)
			}
			return out
		}
		p.Decodes = append(p.Decodes, engine.Decode{Lane: 1})
	}
}

// Rows prefilled through PrefillRows are the prompt rows they stand for:
// a prompt whose middle tokens are fed as their own embedding rows (over
// placeholder tokens) generates greedily what the all-token prompt does.
// That is the path an image's rows take.
func TestPrefillRowsEqualsTokens(t *testing.T) {
	path := tinyModel(t)
	e, err := Open(Options{ModelPath: path, Ctx: 512, Lanes: 1, Seqs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt, err := e.Tokenize("the quick brown fox jumps over the lazy dog and then", true, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(prompt) < 8 {
		t.Fatalf("prompt of %d tokens", len(prompt))
	}
	want := runWithRows(t, e, prompt, len(prompt)-1, nil, 12)
	at, span := 2, len(prompt)-4
	holed := slices.Clone(prompt)
	for i := at; i < at+span; i++ {
		holed[i] = 0 // placeholders: never decoded
	}
	got := runWithRows(t, e, holed, at, tokenRows(t, path, prompt[at:at+span]), 12)
	if !slices.Equal(got, want) {
		t.Errorf("rows for tokens %v, want the tokens' %v", got, want)
	}
	// Placeholders decoded as tokens would give other text: the oracle can
	// fail.
	if other := runWithRows(t, e, holed, len(holed)-1, nil, 12); slices.Equal(other, want) {
		t.Error("the placeholder prompt generated the same text: the test proves nothing")
	}
}

// An image's encoded rows prefill as a span; greedy output with the image
// is the same on every run, and another image changes it. PrefillRows
// refuses spans it cannot take, changing nothing.
func TestPrefillImageRows(t *testing.T) {
	e, m := openMedia(t)
	run := func(img []byte) []engine.Token {
		p, err := m.Tokenize("look: "+m.Marker()+" and say what it is", [][]byte{img}, true)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Free()
		var prompt []engine.Token
		var rows []float32
		at := -1
		for i, c := range p.Chunks {
			if c.Kind == MediaImage {
				at = len(prompt)
				if rows, err = m.Encode(p, i, nil); err != nil {
					t.Fatal(err)
				}
				prompt = append(prompt, make([]engine.Token, c.Rows)...)
				continue
			}
			prompt = append(prompt, c.Tokens...)
		}
		return runWithRows(t, e, prompt, at, rows, 10)
	}
	a, b := testPNG(t, 50, 40, 1), testPNG(t, 50, 40, 77)
	first := run(a)
	if again := run(a); !slices.Equal(first, again) {
		t.Errorf("the same image twice: %v then %v", first, again)
	}
	if other := run(b); slices.Equal(first, other) {
		t.Logf("another image gave the same greedy text %v (possible on a random model)", other)
	}

	if err := e.Free(0); err != nil {
		t.Fatal(err)
	}
	var p engine.Plan
	prompt := make([]engine.Token, 8)
	p.AddAdmit(engine.Admit{Lane: 2, Seq: 0, MaxTokens: 4, Sampling: engine.Greedy()}, prompt, nil)
	if _, err := e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	w := e.RowWidth()
	for _, c := range []struct {
		name string
		lane uint32
		rows []float32
	}{
		{"to the prompt's end", 2, make([]float32, 8*w)},
		{"unknown lane", 9, make([]float32, w)},
		{"not whole rows", 2, make([]float32, w+1)},
		{"no rows", 2, nil},
	} {
		var ee *engine.Error
		if err := e.PrefillRows(c.lane, c.rows); err == nil || !errors.As(err, &ee) {
			t.Errorf("%s: %v, want an engine error", c.name, err)
		}
	}
	if err := e.PrefillRows(2, make([]float32, 7*w)); err != nil {
		t.Errorf("7 rows of an 8-token prompt: %v", err)
	}
}
