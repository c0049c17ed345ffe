package app

import (
	"path/filepath"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

func TestResidentBudget(t *testing.T) {
	cases := []struct {
		name    string
		partial engine.Partial
		ctx     int
		host    int64
		want    int
	}{
		{"full attention with a host tier keeps a padding block", engine.PartialNone, 8192, 1 << 30, residentIdleTokens},
		{"a context smaller than two blocks keeps half", engine.PartialNone, 256, 1 << 30, 128},
		{"without a host tier an evicted entry is lost", engine.PartialNone, 8192, 0, 4096},
		{"a sliding-window model's host copy loses its cuts", engine.PartialSWA, 8192, 1 << 30, 4096},
		{"a recurrent model's host copy loses its cuts", engine.PartialRecurrent, 16384, 1 << 30, 8192},
	}
	for _, c := range cases {
		desc := &engine.Descriptor{Ctx: c.ctx, Partial: c.partial}
		if got := residentBudget(desc, c.host); got != c.want {
			t.Errorf("%s: residentBudget = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestWindowResidentBudget(t *testing.T) {
	cases := []struct {
		partial   engine.Partial
		hostBytes int64
		want      int
	}{
		// With a host tier the idle budget: other conversations' entries
		// wait there, not in every step's attention.
		{engine.PartialSWA, 1 << 30, 256},
		{engine.PartialSWA, 0, 6144},
		{engine.PartialNone, 1 << 30, 0},
		{engine.PartialRecurrent, 1 << 30, 0},
	}
	for _, c := range cases {
		desc := &engine.Descriptor{Ctx: 8192, Partial: c.partial}
		if got := windowResidentBudget(desc, c.hostBytes); got != c.want {
			t.Errorf("partial %v, host %d: windowResidentBudget = %d, want %d", c.partial, c.hostBytes, got, c.want)
		}
	}
}

// A sliding-window model opens lanes + 2 sequences unless --seqs says
// otherwise: its window cache grows with them (engineSeqs).
func TestSlidingWindowModelOpensFewerSequences(t *testing.T) {
	dir := t.TempDir()
	tiny, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	window, dense := filepath.Join(dir, "gemma4.gguf"), filepath.Join(dir, "qwen3.gguf")
	if err := synth.Write(window, synth.Options{Shape: tiny, Arch: "gemma4", Type: "f16", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(dense, synth.Options{Shape: tiny, Arch: "qwen3", Type: "f16", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		seqs int
		want int
	}{{window, 0, 6}, {dense, 0, 16}, {window, 9, 9}, {dense, 5, 5}} {
		if got := engineSeqs(c.path, Options{Lanes: 4, Seqs: c.seqs}); got != c.want {
			t.Errorf("%s with --seqs %d: %d sequences, want %d", filepath.Base(c.path), c.seqs, got, c.want)
		}
	}
}
