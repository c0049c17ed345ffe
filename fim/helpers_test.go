package fim

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
)

// byteBase is where the fake byte tokenizer's tokens start, above every
// special token of the fake vocabularies, so text can never produce a marker.
const byteBase = 1000

// byteTok tokenizes one token per byte: layouts become readable and token
// counts equal byte counts.
type byteTok struct{}

func (byteTok) Tokenize(s string) ([]engine.Token, error) {
	out := make([]engine.Token, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = byteBase + engine.Token(s[i])
	}
	return out, nil
}

// failTok fails on texts containing bad.
type failTok struct{ bad string }

func (f failTok) Tokenize(s string) ([]engine.Token, error) {
	if strings.Contains(s, f.bad) {
		return nil, errors.New("boom")
	}
	return byteTok{}.Tokenize(s)
}

// vocab is a fake vocabulary: special tokens at their index, bytes at
// byteBase+b, filler elsewhere.
type vocab struct {
	specials []string
	bos      engine.Token
	addBOS   bool
}

func (v vocab) size() int { return byteBase + 256 }

func (v vocab) text(t engine.Token) string {
	switch {
	case int(t) < len(v.specials):
		return v.specials[t]
	case t >= byteBase && t < byteBase+256:
		return string(rune(t - byteBase))
	}
	return "filler"
}

func (v vocab) id(text string) engine.Token {
	for i, s := range v.specials {
		if s == text {
			return engine.Token(i)
		}
	}
	return -1
}

// render shows tokens as text: specials by their text, bytes as bytes.
func (v vocab) render(toks []engine.Token) string {
	var sb strings.Builder
	for _, t := range toks {
		if t >= byteBase {
			sb.WriteByte(byte(t - byteBase))
		} else {
			sb.WriteString(v.text(t))
		}
	}
	return sb.String()
}

// The fake vocabularies of each family, with the real token texts.
var (
	qwenVocab = vocab{specials: []string{"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
		"<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}, bos: 0}
	starVocab = vocab{specials: []string{"<|endoftext|>", "<fim_prefix>", "<fim_middle>",
		"<fim_suffix>", "<fim_pad>", "<repo_name>", "<file_sep>"}, bos: 0}
	llamaVocab = vocab{specials: []string{"<unk>", "<s>", "</s>", "▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"},
		bos: 1, addBOS: true}
	deepseekVocab = vocab{specials: []string{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
		"<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>"}, bos: 0, addBOS: true}
	mistralVocab = vocab{specials: []string{"<unk>", "<s>", "</s>", "[INST]", "[/INST]",
		"[PREFIX]", "[MIDDLE]", "[SUFFIX]"}, bos: 1, addBOS: true}
	plainVocab = vocab{specials: []string{"<unk>", "<s>", "</s>"}, bos: 1, addBOS: true}
)

// llamaCppFIM finds FIM ids by text with the rules of llama.cpp's loader
// (llama-vocab.cpp as vendored by ollama v0.24.0): what engine.FIM holds.
func llamaCppFIM(n int, text func(engine.Token) string) engine.FIM {
	f := engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1}
	type rule struct {
		id    *engine.Token
		texts []string
	}
	rules := []rule{
		{&f.Prefix, []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>"}},
		{&f.Suffix, []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>"}},
		{&f.Middle, []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>"}},
		{&f.Pad, []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}},
		{&f.RepoName, []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
		{&f.FileSep, []string{"<|file_sep|>"}},
	}
	for id := 0; id < n; id++ {
		t := text(engine.Token(id))
		for _, r := range rules {
			if *r.id < 0 && slices.Contains(r.texts, t) {
				*r.id = engine.Token(id)
			}
		}
	}
	return f
}

// builderFor makes a Builder as the server would: ids from llama.cpp's
// rules, the rest found by the package.
func builderFor(t testing.TB, v vocab) *Builder {
	t.Helper()
	b, err := NewBuilder(Config{FIM: llamaCppFIM(v.size(), v.text), TokenText: v.text,
		NumTokens: v.size(), BOS: v.bos, AddBOS: v.addBOS})
	if err != nil {
		t.Fatalf("NewBuilder: %v", err)
	}
	return b
}

// build runs Build with the byte tokenizer and renders the result.
func build(t testing.TB, b *Builder, v vocab, r Request, budget int) (string, Info) {
	t.Helper()
	toks, info, err := b.Build(byteTok{}, r, budget)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	checkPrompt(t, b, r, budget, toks, info)
	return v.render(toks), info
}
