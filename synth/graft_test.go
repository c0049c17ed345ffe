package synth

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"superfluid/gguf"
)

// sharedModel finds a file in the project's shared/models folder, which
// sits beside the repository checkout (../shared from the repository root),
// or skips the test when the folder is absent.
func sharedModel(t *testing.T, name string) string {
	t.Helper()
	for _, dir := range []string{"../../shared/models", "../shared/models"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skipf("shared/models/%s not found beside the repository: skipping the vocabulary graft test", name)
	return ""
}

func TestGraftQwen25(t *testing.T) {
	vocabPath := sharedModel(t, "ggml-vocab-qwen2.5.gguf")
	src, err := gguf.Open(vocabPath)
	if err != nil {
		t.Fatal(err)
	}
	path := write(t, Options{Shape: tiny(t), VocabFile: vocabPath, Type: "q8_0", Seed: 1})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	copied := 0
	for _, kv := range src.KVs {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			if _, ok := f.Value(kv.Key); ok && !strings.HasPrefix(kv.Key, "general.") {
				t.Errorf("non-tokenizer key %s copied", kv.Key)
			}
			continue
		}
		got, ok := f.Value(kv.Key)
		if !ok || !reflect.DeepEqual(got, kv.Value) {
			t.Errorf("%s not copied verbatim", kv.Key)
		}
		copied++
	}
	if copied < 8 {
		t.Errorf("only %d tokenizer keys copied", copied)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	if n, _ := f.Uint32("llama.vocab_size"); int(n) != len(toks) {
		t.Errorf("llama.vocab_size %d for %d tokens", n, len(toks))
	}
	real := 0
	for _, tok := range toks {
		if !strings.HasPrefix(tok, "[PAD") {
			real++
		}
	}
	if real != 151665 {
		t.Errorf("%d real tokens, want Qwen2.5's 151665", real)
	}
	emb, _ := f.Tensor("token_embd.weight")
	if emb.Dims[1] != uint64(len(toks)) {
		t.Errorf("token_embd has %d rows for %d tokens", emb.Dims[1], len(toks))
	}
	fim := map[string]int{"<|fim_prefix|>": 151659, "<|fim_middle|>": 151660, "<|fim_suffix|>": 151661,
		"<|fim_pad|>": 151662, "<|repo_name|>": 151663, "<|file_sep|>": 151664, "<|im_end|>": 151645}
	for text, id := range fim {
		if toks[id] != text {
			t.Errorf("token %d is %q, want %q", id, toks[id], text)
		}
	}
	if tmpl, _ := f.String("tokenizer.chat_template"); !strings.Contains(tmpl, "<|im_start|>") {
		t.Error("chat template not carried over")
	}

	voc, err := graftVocab(vocabPath)
	if err != nil {
		t.Fatal(err)
	}
	for text, id := range fim {
		if !voc.suppress[id] {
			t.Errorf("%s not suppressed", text)
		}
	}
	if !voc.suppress[151665] || !voc.suppress[len(toks)-1] {
		t.Error("[PAD] tokens not suppressed")
	}
	if voc.suppress[279] || voc.suppress[3974] { // " the", " quick"
		t.Error("ordinary words suppressed")
	}
	fragments := 0
	for i, tok := range toks {
		if b, _ := decodeBytes(tok); i < 151643 && voc.suppress[i] && !isPlainText(b) {
			fragments++
		}
	}
	if fragments < 100 {
		t.Errorf("only %d byte-fragment tokens suppressed", fragments)
	}
}

func TestGraftSPM(t *testing.T) {
	vocabPath := sharedModel(t, "ggml-vocab-llama-spm.gguf")
	voc, err := graftVocab(vocabPath)
	if err != nil {
		t.Fatal(err)
	}
	if voc.size != 32000 {
		t.Errorf("size %d", voc.size)
	}
	for i := 0; i < 3+256; i++ { // <unk>, <s>, </s>, then the <0xNN> byte tokens
		if !voc.suppress[i] {
			t.Errorf("token %d not suppressed", i)
		}
	}
	normal := 0
	for _, s := range voc.suppress[259:] {
		if !s {
			normal++
		}
	}
	if normal < 30000 {
		t.Errorf("only %d ordinary tokens left", normal)
	}
}
