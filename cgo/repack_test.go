package cgo

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

// writeTiny writes the tiny synthetic shape with matrices of type typ.
func writeTiny(t *testing.T, typ string) string {
	t.Helper()
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny-"+typ+".gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: typ, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	return path
}

func openRepack(t *testing.T, path string, noRepack bool) *Engine {
	t.Helper()
	e, err := Open(Options{ModelPath: path, Ctx: 512, Lanes: 2, Seqs: 2, Batch: 128, Threads: 1, NoRepack: noRepack})
	if err != nil {
		t.Fatalf("open %s (no repack %v): %v", filepath.Base(path), noRepack, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// Both routes build ggml's CPU backend with repacking (GGML_USE_CPU_REPACK):
// a Q4_0 model's matrices are held repacked unless NoRepack says not to,
// and the two layouts decode the same greedy tokens.
func TestQ4_0WeightsRepacked(t *testing.T) {
	if f := CPUFeatures(); !strings.Contains(f, "REPACK=1") {
		t.Fatalf("CPU backend built without weight repacking: features %q", f)
	}
	path := writeTiny(t, "q4_0")
	on, off := openRepack(t, path, false), openRepack(t, path, true)
	if !strings.Contains(CPUFeatures(), "AVX2=1") {
		t.Skip("no AVX2: ggml repacks Q4_0 only for its AVX2 (or ARM/RISC-V) kernels")
	}
	// The tiny shape's layer matrices: 2 × (3×64×64 + 2×64×32 + 3×64×128)
	// values, 18 bytes per 32 (the tied embeddings may be repacked too).
	const layerBytes = 2 * (3*64*64 + 2*64*32 + 3*64*128) / 32 * 18
	if n := on.RepackedBytes(); n < layerBytes {
		t.Fatalf("repacking on: %d weight bytes in CPU_REPACK buffers, want at least the layers' %d", n, layerBytes)
	}
	t.Logf("repacked %d weight bytes (layers %d)", on.RepackedBytes(), layerBytes)
	if n := off.RepackedBytes(); n != 0 {
		t.Fatalf("NoRepack: %d weight bytes repacked, want 0", n)
	}
	prompts := [][]engine.Token{promptTokens(t, on, 40, "repack"), promptTokens(t, on, 9, "short")}
	a := generate(t, on, prompts, 24, 16, engine.Greedy())
	b := generate(t, off, prompts, 24, 16, engine.Greedy())
	for i := range prompts {
		if len(a[i]) != 24 {
			t.Errorf("lane %d: %d tokens, want 24", i, len(a[i]))
		}
		if !slices.Equal(a[i], b[i]) {
			t.Errorf("lane %d: repacked and plain weights decode differently:\n%v\n%v", i, a[i], b[i])
		}
	}
}

// Q8_0 is not repacked on x86 (ggml's repack table has Q8_0 layouts for
// ARM and RISC-V only), so its weights stay in the file's layout either way.
func TestQ8_0WeightsNotRepackedOnX86(t *testing.T) {
	if !strings.Contains(CPUFeatures(), "AVX2=1") || strings.Contains(CPUFeatures(), "NEON") {
		t.Skip("x86 with AVX2 only")
	}
	e := openRepack(t, writeTiny(t, "q8_0"), false)
	if n := e.RepackedBytes(); n != 0 {
		t.Fatalf("q8_0: %d bytes repacked, want 0 on x86", n)
	}
}
