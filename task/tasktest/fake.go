package tasktest

import (
	"errors"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/fim"
	"superfluid/task"
)

// A byte-level vocabulary for tests of the completion and infill
// decoders: ids 0–255 are bytes, then BOS, EOS and Qwen's FIM tokens.
const (
	FakeBOS engine.Token = 256 + iota
	FakeEOS
	FakeFIMPrefix
	FakeFIMSuffix
	FakeFIMMiddle
	FakeFIMPad
	FakeRepoName
	FakeFileSep
	FakeVocab = int(FakeFileSep) + 1
)

var fakeSpecials = map[engine.Token]string{
	FakeBOS: "<s>", FakeEOS: "</s>", FakeFIMPrefix: "<|fim_prefix|>", FakeFIMSuffix: "<|fim_suffix|>",
	FakeFIMMiddle: "<|fim_middle|>", FakeFIMPad: "<|fim_pad|>", FakeRepoName: "<|repo_name|>", FakeFileSep: "<|file_sep|>",
}

// FakeText implements task.Text over the byte-level vocabulary; with
// addSpecial it starts with BOS.
type FakeText struct{}

func (FakeText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	var out []engine.Token
	if addSpecial {
		out = append(out, FakeBOS)
	}
	return appendBytes(out, text, parseSpecial, fakeSpecialAt), nil
}

func fakeSpecialAt(s string) (engine.Token, int) {
	for id, name := range fakeSpecials {
		if strings.HasPrefix(s, name) {
			return id, len(name)
		}
	}
	return 0, 0
}

func (FakeText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	if tok >= 0 && tok < 256 {
		return append(dst, byte(tok))
	}
	if special {
		return append(dst, fakeSpecials[tok]...)
	}
	return dst
}

func (f FakeText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, t := range tokens {
		b = f.AppendPiece(b, t, special)
	}
	return string(b)
}

// FakeModel is "fake" over the fake vocabulary with a context of 512 and
// no chat template; fimCapable chooses whether its vocabulary can fill in
// the middle. Its scheduler refuses everything.
func FakeModel(t testing.TB, fimCapable bool) *task.Model {
	t.Helper()
	ids := engine.FIM{Prefix: FakeFIMPrefix, Suffix: FakeFIMSuffix, Middle: FakeFIMMiddle, Pad: FakeFIMPad, RepoName: FakeRepoName, FileSep: FakeFileSep}
	if !fimCapable {
		ids = engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1}
	}
	desc := &engine.Descriptor{Vocab: FakeVocab, Ctx: 512, Lanes: 2, BOS: FakeBOS, EOS: FakeEOS, EOT: -1,
		EOG: []engine.Token{FakeEOS}, AddBOS: true, FIM: ids}
	text := func(t engine.Token) string {
		if !fimCapable && t > FakeEOS {
			return "" // a vocabulary whose FIM tokens cannot be found by text either
		}
		return string(FakeText{}.AppendPiece(nil, t, true))
	}
	b, err := fim.FromDescriptor(desc, text)
	if err != nil && !errors.Is(err, fim.ErrNoFIM) {
		t.Fatal(err)
	}
	return &task.Model{Name: "fake", Path: "/models/fake.gguf", Desc: desc, Text: FakeText{}, Sched: idleSched{}, FIM: b}
}
