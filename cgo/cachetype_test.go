package cgo

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

// smallModel writes (once) the small synthetic shape: head size 64, two
// whole blocks of every quantized KV type (the tiny shape's 16 is none).
func smallModel(t testing.TB) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	const key = "\x00small"
	if p, ok := modelMemo[key]; ok {
		return p
	}
	shape, err := synth.ShapeByName("small")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "small-q8_0.gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "q8_0", Seed: 7}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

func openCacheTypes(t *testing.T, path, typeK, typeV, flashAttn string) *Engine {
	t.Helper()
	e, err := Open(Options{ModelPath: path, Ctx: 256, Lanes: 1, Seqs: 2, Batch: 64, Threads: 1, CacheTypeK: typeK, CacheTypeV: typeV, FlashAttn: flashAttn})
	if err != nil {
		t.Fatalf("open with K %s, V %s, flash attention %q: %v", typeK, typeV, flashAttn, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestCacheTypesRefusedByName(t *testing.T) {
	path := tinyModel(t)
	for _, c := range []struct {
		typeK, typeV, flashAttn, want string
	}{
		{"q2", "f16", "", `--cache-type-k "q2"`},
		{"f16", "Q8_0", "", `--cache-type-v "Q8_0"`},
		{"q8", "q8", "", `--cache-type-k "q8"`},
		{"f16", "q8_0", "off", "--cache-type-v q8_0 needs flash attention"},
		{"f16", "iq4_nl", "off", "--cache-type-v iq4_nl needs flash attention"},
		// The tiny model's head size (16) is no whole block: a clear error
		// where ggml would abort the process.
		{"q8_0", "f16", "", "K cache of type q8_0 needs a head size divisible by 32"},
		{"f16", "q4_0", "", "V cache of type q4_0 needs a head size divisible by 32"},
	} {
		_, err := Open(Options{ModelPath: path, Ctx: 256, Lanes: 1, Threads: 1, CacheTypeK: c.typeK, CacheTypeV: c.typeV, FlashAttn: c.flashAttn})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("K %q, V %q, flash attention %q: %v, want %q", c.typeK, c.typeV, c.flashAttn, err, c.want)
		}
	}
}

// blockBytes is each cache type's bytes per block and values per block
// (ggml's type sizes).
var blockBytes = map[string][2]int64{"f32": {4, 1}, "f16": {2, 1}, "bf16": {2, 1}, "q8_0": {34, 32}, "q4_0": {18, 32},
	"q4_1": {20, 32}, "iq4_nl": {18, 32}, "q5_0": {22, 32}, "q5_1": {24, 32}}

// Every KV cache type llama.cpp's -ctk/-ctv take opens, reports itself
// and its bytes per token in the descriptor, and generates; a quantized K
// cache runs without flash attention too (only V needs it), and "auto"
// turns flash attention on for a quantized V.
func TestEveryCacheTypeGenerates(t *testing.T) {
	path := smallModel(t)
	shape, _ := synth.ShapeByName("small")
	for _, typ := range CacheTypes {
		e := openCacheTypes(t, path, typ, typ, "auto")
		d := e.Descriptor()
		if d.CacheTypeK != typ || d.CacheTypeV != typ {
			t.Fatalf("%s: the descriptor says K %s, V %s", typ, d.CacheTypeK, d.CacheTypeV)
		}
		size := blockBytes[typ] // bytes per block of values
		if want := int64(shape.Layers*2*shape.KVDim()) * size[0] / size[1]; d.KVBytesPerToken != want {
			t.Errorf("%s: %d KV bytes per token, want %d", typ, d.KVBytesPerToken, want)
		}
		out := generate(t, e, [][]engine.Token{promptTokens(t, e, 40, typ)}, 8, 64, engine.Greedy())
		if len(out[0]) != 8 {
			t.Errorf("%s: generated %d tokens", typ, len(out[0]))
		}
		e.Close()
	}
	e := openCacheTypes(t, path, "q8_0", "f16", "off")
	if out := generate(t, e, [][]engine.Token{promptTokens(t, e, 40, "k")}, 4, 64, engine.Greedy()); len(out[0]) != 4 {
		t.Errorf("a q8_0 K cache without flash attention generated %d tokens", len(out[0]))
	}
}

// Exported state carries its cache types: an engine of the same types
// imports it, one of other types (either cache) refuses it instead of
// reading its rows as its own.
func TestStateOfAnotherCacheTypeRefused(t *testing.T) {
	path := smallModel(t)
	src := openCacheTypes(t, path, "q8_0", "q8_0", "")
	prompt := promptTokens(t, src, 30, "state")
	generate(t, src, [][]engine.Token{prompt}, 2, 64, engine.Greedy())
	blob, err := src.Export(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	same := openCacheTypes(t, path, "q8_0", "q8_0", "")
	if n, err := same.Import(0, blob); err != nil || n != len(prompt)+1 {
		t.Fatalf("import into the same types: %d tokens, %v", n, err)
	}
	for _, types := range [][2]string{{"f16", "f16"}, {"q8_0", "f16"}, {"f16", "q8_0"}, {"q4_0", "q4_0"}} {
		other := openCacheTypes(t, path, types[0], types[1], "")
		if _, err := other.Import(0, blob); !errors.Is(err, engine.ErrState) {
			t.Errorf("a q8_0 state imported into K %s, V %s: %v", types[0], types[1], err)
		}
		other.Close()
	}
}

// The descriptor's KV bytes per token are what the state of one more
// token weighs: two exported sequences 32 tokens apart differ by 32 times
// it, plus the 12 bytes llama.cpp writes for each cell (its position and
// one sequence id).
func TestKVBytesPerTokenIsTheStateSize(t *testing.T) {
	path := smallModel(t)
	const cellMeta = 12
	for _, types := range [][2]string{{"f16", "f16"}, {"q8_0", "q8_0"}, {"q4_0", "q4_0"}, {"q8_0", "f16"}} {
		e := openCacheTypes(t, path, types[0], types[1], "")
		long := promptTokens(t, e, 64, "size")
		generate(t, e, [][]engine.Token{long[:32]}, 1, 64, engine.Greedy())
		short, err := e.Export(0, nil)
		if err != nil {
			t.Fatal(err)
		}
		generate(t, e, [][]engine.Token{long}, 1, 64, engine.Greedy())
		full, err := e.Export(0, nil)
		if err != nil {
			t.Fatal(err)
		}
		perToken := int64(len(full)-len(short))/32 - cellMeta
		if d := e.Descriptor(); perToken != d.KVBytesPerToken || int64(len(full)-len(short))%32 != 0 {
			t.Errorf("K %s, V %s: the state grows by %d bytes a token (%d over 32), the descriptor says %d", types[0], types[1],
				perToken, len(full)-len(short), d.KVBytesPerToken)
		}
		e.Close()
	}
}

// The upstream route's embedding context keeps f16 cells whatever the
// server's cache types (native/engine.cpp sf_context_params), and says so:
// the tiny embedding model opens with q8_0 asked, though its head size
// is no whole q8_0 block.
func TestEmbeddingContextKeepsF16(t *testing.T) {
	if !upstreamLlama {
		t.Skip("the Go module's llama.cpp embeds with the configured cache types")
	}
	e, err := Open(Options{ModelPath: embedModel(t, "mean"), Ctx: 256, Lanes: 1, Seqs: 4, Batch: 256, UBatch: 256, Threads: 1,
		CacheTypeK: "q8_0", CacheTypeV: "q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if d := e.Descriptor(); d.CacheTypeK != "f16" || d.CacheTypeV != "f16" {
		t.Fatalf("the embedding engine holds K %s, V %s", d.CacheTypeK, d.CacheTypeV)
	}
}

// The descriptor's KV bytes per token are what llama.cpp allocated: a
// sliding-window model's full-attention layers and its sliding layers at
// their windows' share (the context sizes their cache to the windows, as
// llama-server does), a hybrid model's attention layers only, its
// recurrent layers' fixed state reported apart.
func TestKVBytesPerTokenCountsWhatIsAllocated(t *testing.T) {
	if !upstreamLlama {
		t.Skip("gemma4 and qwen35 need the upstream llama.cpp")
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	everyLayer := int64(shape.Layers * 2 * shape.KVDim() * 2) // f16 K and V in every layer
	open := func(arch string) *engine.Descriptor {
		e, err := Open(Options{ModelPath: archModel(t, arch), Ctx: 8192, Lanes: 1, Seqs: 2, Batch: 512, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.Descriptor()
	}
	// The sliding-window layers keep only their windows (swa_full off):
	// per context token they cost their cache's share, less than a full
	// layer, and more than nothing.
	g := open("gemma4")
	if g.KVBytesPerToken <= 0 || g.KVBytesPerToken >= everyLayer || g.RecurrentStateBytes != 0 {
		t.Errorf("gemma4: %d KV bytes per token (recurrent %d), want within (0, %d): the sliding layers at their windows' share",
			g.KVBytesPerToken, g.RecurrentStateBytes, everyLayer)
	}
	d := open("qwen35")
	if d.KVBytesPerToken <= 0 || d.KVBytesPerToken >= everyLayer || d.RecurrentStateBytes <= 0 {
		t.Errorf("qwen35: %d KV bytes per token (every layer would be %d), recurrent state %d bytes", d.KVBytesPerToken, everyLayer, d.RecurrentStateBytes)
	}
	t.Logf("tiny, f16: every layer %d bytes per token; qwen35 %d and %d bytes of recurrent state (2 sequences)",
		everyLayer, d.KVBytesPerToken, d.RecurrentStateBytes)
}
