package cgo

import (
	"path/filepath"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

// archModel writes a tiny synthetic model of one architecture.
func archModel(t *testing.T, arch string) string {
	t.Helper()
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: 7, Arch: arch}); err != nil {
		t.Fatal(err)
	}
	return path
}

// generateGreedy opens path and decodes 16 greedy tokens after a short prompt.
func generateGreedy(t *testing.T, path string) []engine.Token {
	t.Helper()
	e, err := Open(Options{ModelPath: path, Ctx: 1024, Lanes: 1, Seqs: 4, Batch: 256, Threads: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer e.Close()
	out := generate(t, e, [][]engine.Token{promptTokens(t, e, 24, "arch")}, 16, 64, engine.Greedy())
	if len(out[0]) != 16 {
		t.Fatalf("generated %d tokens, want 16", len(out[0]))
	}
	return out[0]
}

// Both engines know llama, qwen2 and qwen3: each loads and generates, and
// the descriptor names the architecture.
func TestArchitecturesBothEnginesKnow(t *testing.T) {
	for _, arch := range []string{"qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			path := archModel(t, arch)
			e, err := Open(Options{ModelPath: path, Ctx: 512, Lanes: 1, Seqs: 2, Threads: 1})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			arch2 := e.Descriptor().Architecture
			e.Close()
			if arch2 != arch {
				t.Fatalf("descriptor architecture %q, want %q", arch2, arch)
			}
			generateGreedy(t, path)
		})
	}
}

// gemma4 (2026) is known only to an upstream llama.cpp build: there it loads
// and generates; on the Go module's llama.cpp it is refused with a message
// naming the architecture, the compiled commit and how to build a newer one.
func TestArchitectureOnlyUpstreamKnows(t *testing.T) {
	path := archModel(t, "gemma4")
	if upstreamLlama {
		generateGreedy(t, path)
		return
	}
	_, err := Open(Options{ModelPath: path, Ctx: 512, Lanes: 1, Seqs: 2, Threads: 1})
	if err == nil {
		t.Fatal("the Go module's llama.cpp opened a gemma4 model")
	}
	for _, want := range []string{`"gemma4"`, LlamaCommit(), "LLAMA_CPP_DIR="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
}
