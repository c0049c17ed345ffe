package cgo

import (
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
)

func openModel(t *testing.T, path string) *Engine {
	t.Helper()
	e, err := Open(Options{ModelPath: path, Ctx: 512, Lanes: 1, Seqs: 2, Batch: 128, Threads: 1})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestVocabulariesReportTheirFIMTokens(t *testing.T) {
	cases := []struct {
		vocab string // "" is the built-in vocabulary
		fim   bool
	}{
		{"", true},
		{"ggml-vocab-qwen2.5.gguf", true},
		{"ggml-vocab-starcoder.gguf", true},
		{"ggml-vocab-deepseek-coder.gguf", true},
		{"ggml-vocab-qwen2.gguf", false},
	}
	for _, c := range cases {
		name := c.vocab
		if name == "" {
			name = "builtin"
		}
		t.Run(name, func(t *testing.T) {
			vocab := ""
			if c.vocab != "" {
				vocab = sharedModel(t, c.vocab)
			}
			e := openModel(t, synthModel(t, vocab))
			f := e.Descriptor().FIM
			if f.Capable() != c.fim {
				t.Fatalf("FIM tokens %+v, want capable=%v", f, c.fim)
			}
			if !c.fim {
				return
			}
			for _, tok := range []engine.Token{f.Prefix, f.Suffix, f.Middle} {
				piece := string(e.AppendPiece(nil, tok, true))
				if !strings.Contains(strings.ToLower(piece), "fim") {
					t.Errorf("FIM token %d renders as %q", tok, piece)
				}
			}
		})
	}
}

func TestGraftedQwenVocabularyTokenizesAndGenerates(t *testing.T) {
	e := openModel(t, synthModel(t, sharedModel(t, "ggml-vocab-qwen2.5.gguf")))
	d := e.Descriptor()
	if d.Vocab != 151665 && d.Vocab != 151936 {
		t.Fatalf("qwen2.5 vocabulary of %d tokens", d.Vocab)
	}
	toks, err := e.Tokenize("<|im_start|>user\nhello world<|im_end|>", false, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) < 4 || len(toks) > 8 {
		t.Fatalf("ChatML line tokenized as %v", toks)
	}
	if got := e.Detokenize(toks, true); got != "<|im_start|>user\nhello world<|im_end|>" {
		t.Fatalf("round trip gave %q", got)
	}
	text, err := e.ApplyChatTemplate([]Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(text, "<|im_start|>assistant\n") || !strings.Contains(text, "<|im_start|>system\nbe brief<|im_end|>") {
		t.Fatalf("chat template rendered %q", text)
	}
	out := generate(t, e, [][]engine.Token{toks}, 16, 64, engine.Greedy())[0]
	if len(out) != 16 {
		t.Fatalf("generated %d tokens", len(out))
	}
}

func TestRealLlamaModelBatchesLikeSolo(t *testing.T) {
	e, err := Open(Options{ModelPath: sharedModel(t, "llama-2-tiny-random.gguf"), Ctx: 512, Lanes: 2, Seqs: 2, Batch: 128, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a, _ := e.Tokenize("Once upon a time there was", true, false)
	b, _ := e.Tokenize("The capital of France is a city that", true, false)
	both := generate(t, e, [][]engine.Token{a, b}, 12, 64, engine.Greedy())
	for i, p := range [][]engine.Token{a, b} {
		if solo := generate(t, e, [][]engine.Token{p}, 12, 64, engine.Greedy())[0]; !slices.Equal(solo, both[i]) {
			t.Errorf("prompt %d: batched %v solo %v", i, both[i], solo)
		}
	}
}
