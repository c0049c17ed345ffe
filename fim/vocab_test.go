package fim

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"superfluid/engine"
	"superfluid/gguf"
)

// modelsDir holds the shared vocabulary-only GGUF files.
const modelsDir = "../../shared/models"

// realVocab is a vocabulary read from a GGUF file.
type realVocab struct {
	texts  []string
	bos    engine.Token
	addBOS bool
}

func (v realVocab) text(t engine.Token) string {
	if t < 0 || int(t) >= len(v.texts) {
		return ""
	}
	return v.texts[t]
}

func loadVocab(t *testing.T, name string) realVocab {
	t.Helper()
	path := filepath.Join(modelsDir, "ggml-vocab-"+name+".gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no shared vocabulary %s (%v): real-vocabulary checks skipped", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	texts, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok {
		t.Fatalf("%s has no tokenizer.ggml.tokens", path)
	}
	v := realVocab{texts: texts, bos: -1}
	if id, ok := f.Int64("tokenizer.ggml.bos_token_id"); ok {
		v.bos = engine.Token(id)
	}
	v.addBOS, _ = f.Bool("tokenizer.ggml.add_bos_token")
	return v
}

// realBuilder builds as the server does: ids from llama.cpp's rules (what
// the engine reports), the vocabulary size for the package's own lookup.
func realBuilder(v realVocab) (*Builder, engine.FIM, error) {
	fm := llamaCppFIM(len(v.texts), v.text)
	b, err := NewBuilder(Config{FIM: fm, TokenText: v.text, NumTokens: len(v.texts), BOS: v.bos, AddBOS: v.addBOS})
	return b, fm, err
}

func TestRealVocabularies(t *testing.T) {
	cases := []struct {
		name   string
		family Family
		ids    engine.FIM
		repo   bool
	}{
		{"qwen2.5", Qwen, engine.FIM{Prefix: 151659, Middle: 151660, Suffix: 151661, Pad: 151662, RepoName: 151663, FileSep: 151664}, true},
		// llama.cpp finds no <repo_name>/<file_sep> here; the lookup does.
		{"starcoder", StarCoder, engine.FIM{Prefix: 1, Middle: 2, Suffix: 3, Pad: 4, RepoName: 5, FileSep: 6}, true},
		{"deepseek-coder", DeepSeek, engine.FIM{Suffix: 32015, Prefix: 32016, Middle: 32017, Pad: -1, RepoName: -1, FileSep: -1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := loadVocab(t, c.name)
			b, _, err := realBuilder(v)
			if err != nil {
				t.Fatal(err)
			}
			if b.Family() != c.family || b.Tokens() != c.ids || b.RepoLevel() != c.repo || b.Order() != PSM {
				t.Fatalf("family %v ids %+v repo %v", b.Family(), b.Tokens(), b.RepoLevel())
			}
			scratch, err := NewBuilder(Config{FIM: noFIM, TokenText: v.text, NumTokens: len(v.texts), BOS: v.bos, AddBOS: v.addBOS})
			if err != nil || scratch.Tokens() != c.ids {
				t.Fatalf("from texts alone: %+v %v", scratch.Tokens(), err)
			}
			r := Request{Prefix: "def f(", Suffix: "return 1\n", Extra: []File{{Name: "a.py", Text: "x = 1"}}}
			toks, info, err := b.Build(byteTok{}, r, 200)
			if err != nil {
				t.Fatal(err)
			}
			checkPrompt(t, b, r, 200, toks, info)
			if info.RepoLevel != c.repo || info.Extra != 1 {
				t.Fatalf("info %+v", info)
			}
		})
	}
}

// The DeepSeek-Coder vocabulary asks for BOS; its prompt starts with it.
func TestRealDeepSeekBOS(t *testing.T) {
	v := loadVocab(t, "deepseek-coder")
	if !v.addBOS || v.bos != 32013 {
		t.Fatalf("bos %d add %v", v.bos, v.addBOS)
	}
	b, _, _ := realBuilder(v)
	toks, _, err := b.Build(byteTok{}, Request{Prefix: "a", Suffix: "b"}, 10)
	if err != nil || len(toks) != 6 || toks[0] != 32013 || toks[1] != 32016 || toks[3] != 32015 || toks[5] != 32017 {
		t.Fatalf("%v %v", toks, err)
	}
}

// Vocabularies without FIM tokens: Llama's SentencePiece one, and Qwen2's,
// whose ids 151646… are placeholders ([PAD151646]…) where Qwen2.5 has FIM.
func TestRealVocabulariesWithoutFIM(t *testing.T) {
	for _, name := range []string{"llama-spm", "qwen2"} {
		t.Run(name, func(t *testing.T) {
			v := loadVocab(t, name)
			b, fm, err := realBuilder(v)
			if fm != noFIM {
				t.Fatalf("llama.cpp's rules found %+v", fm)
			}
			if !errors.Is(err, ErrNoFIM) || b.Capable() || b.Family() != None {
				t.Fatalf("err %v capable %v", err, b.Capable())
			}
			if name == "qwen2" {
				t.Logf("qwen2 token 151659 is %q", v.text(151659))
			}
		})
	}
}
