package cgo

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"superfluid/engine"
	"superfluid/synth"
)

// archModel writes a tiny synthetic model of one architecture.
func archModel(t *testing.T, arch string) string {
	t.Helper()
	return archModelWithVocab(t, arch, "")
}

// archModelWithVocab writes a tiny synthetic model of one architecture
// with the tokenizer of vocabFile ("" the built-in one).
func archModelWithVocab(t *testing.T, arch, vocabFile string) string {
	t.Helper()
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: 7, Arch: arch, VocabFile: vocabFile}); err != nil {
		t.Fatal(err)
	}
	return path
}

// generateGreedy opens path and decodes 16 greedy tokens after a short prompt.
func generateGreedy(t *testing.T, path string) []engine.Token {
	t.Helper()
	toks, _ := generateGreedyText(t, path)
	return toks
}

// generateGreedyText is generateGreedy with the tokens' text.
func generateGreedyText(t *testing.T, path string) ([]engine.Token, string) {
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
	return out[0], e.Detokenize(out[0], false)
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

// The 2026 families synth writes: sliding window (gemma4), hybrids of
// attention and gated delta nets (qwen35, qwen35moe), mixture of experts
// (qwen3moe, qwen35moe). hybrid: the descriptor must say a sequence cannot
// be cut anywhere (recurrent state); moduleKnows: the Go module's older
// llama.cpp (ENGINE=module) loads it too.
var currentArches = []struct {
	arch        string
	hybrid      bool
	moduleKnows bool
}{
	{"gemma4", false, false},
	{"qwen35", true, false},
	{"qwen35moe", true, false},
	{"qwen3moe", false, true},
}

// On the current engine each 2026 family loads, its descriptor names it
// and says whether it is hybrid, and it generates, the same greedy tokens
// from a second engine. On the Go module's llama.cpp an architecture it
// does not know is refused with a message naming the architecture, the
// compiled commit and how to build the current one.
func TestArchitecturesOfTheCurrentEngine(t *testing.T) {
	for _, c := range currentArches {
		t.Run(c.arch, func(t *testing.T) {
			path := archModel(t, c.arch)
			e, err := Open(Options{ModelPath: path, Ctx: 512, Lanes: 1, Seqs: 2, Threads: 1})
			if !upstreamLlama && !c.moduleKnows {
				if err == nil {
					e.Close()
					t.Fatalf("the Go module's llama.cpp opened a %s model", c.arch)
				}
				for _, want := range []string{`"` + c.arch + `"`, LlamaCommit(), "make"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("refusal %q does not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			d := e.Descriptor()
			e.Close()
			if d.Architecture != c.arch {
				t.Errorf("descriptor architecture %q, want %q", d.Architecture, c.arch)
			}
			if (d.Partial == engine.PartialRecurrent) != c.hybrid || d.PartialTruncation != (d.Partial == engine.PartialNone) {
				t.Errorf("descriptor partial state %q, partial_truncation %v for a model whose hybrid is %v", d.Partial, d.PartialTruncation, c.hybrid)
			}
			first := generateGreedy(t, path)
			if second := generateGreedy(t, path); !slices.Equal(first, second) {
				t.Fatalf("greedy output differs between two engines:\n%v\n%v", first, second)
			}
			if len(slices.Compact(slices.Clone(first))) < 4 {
				t.Errorf("greedy output is a handful of repeated tokens: %v", first)
			}
		})
	}
}

// With Qwen3's real tokenizer grafted (the vocabulary Qwen3.5 and the
// Qwen3 MoE models share but for Qwen3.5's added tokens), each Qwen family
// loads, its descriptor counts that vocabulary, and greedy decoding yields
// plain text.
func TestArchitecturesWithTheQwen3Vocabulary(t *testing.T) {
	if !upstreamLlama {
		t.Skip("the 2026 families need the current engine")
	}
	vocab := sharedModel(t, "ggml-vocab-qwen3.gguf")
	for _, arch := range []string{"qwen35", "qwen35moe", "qwen3moe"} {
		t.Run(arch, func(t *testing.T) {
			path := archModelWithVocab(t, arch, vocab)
			toks, text := generateGreedyText(t, path)
			if !utf8.ValidString(text) || strings.ContainsRune(text, utf8.RuneError) || strings.TrimSpace(text) == "" {
				t.Fatalf("greedy text %q (tokens %v) is not plain text", text, toks)
			}
		})
	}
}
