package llamacpp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/fim"
	"superfluid/sched"
	"superfluid/task"
)

// A byte-level vocabulary for tests of the /completion and /infill
// decoders: ids 0–255 are bytes, then BOS, EOS and Qwen's FIM tokens.
const (
	fakeBOS engine.Token = 256 + iota
	fakeEOS
	fakeFIMPrefix
	fakeFIMSuffix
	fakeFIMMiddle
	fakeFIMPad
	fakeRepoName
	fakeFileSep
	fakeVocab = int(fakeFileSep) + 1
)

var fakeSpecials = map[engine.Token]string{
	fakeBOS: "<s>", fakeEOS: "</s>", fakeFIMPrefix: "<|fim_prefix|>", fakeFIMSuffix: "<|fim_suffix|>",
	fakeFIMMiddle: "<|fim_middle|>", fakeFIMPad: "<|fim_pad|>", fakeRepoName: "<|repo_name|>", fakeFileSep: "<|file_sep|>",
}

// fakeText implements Text over the byte-level vocabulary.
type fakeText struct{}

func (fakeText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	var out []engine.Token
	if addSpecial {
		out = append(out, fakeBOS)
	}
	for i := 0; i < len(text); {
		if parseSpecial {
			if id, n := fakeSpecialAt(text[i:]); n > 0 {
				out = append(out, id)
				i += n
				continue
			}
		}
		out = append(out, engine.Token(text[i]))
		i++
	}
	return out, nil
}

func fakeSpecialAt(s string) (engine.Token, int) {
	for id, name := range fakeSpecials {
		if strings.HasPrefix(s, name) {
			return id, len(name)
		}
	}
	return 0, 0
}

func (fakeText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	if tok >= 0 && tok < 256 {
		return append(dst, byte(tok))
	}
	if special {
		return append(dst, fakeSpecials[tok]...)
	}
	return dst
}

func (f fakeText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, t := range tokens {
		b = f.AppendPiece(b, t, special)
	}
	return string(b)
}

// refusingSched refuses every request: decoding tests never generate.
type refusingSched struct{}

func (refusingSched) Submit(context.Context, sched.Request) (*sched.Stream, error) {
	return nil, errors.New("test: no scheduler")
}

func (refusingSched) Stats() sched.Snapshot { return sched.Snapshot{} }

// fakeModel is a model over the fake vocabulary with a small context;
// fimCapable chooses whether its vocabulary can fill in the middle.
func fakeModel(t testing.TB, fimCapable bool) *task.Model {
	t.Helper()
	ids := engine.FIM{Prefix: fakeFIMPrefix, Suffix: fakeFIMSuffix, Middle: fakeFIMMiddle, Pad: fakeFIMPad, RepoName: fakeRepoName, FileSep: fakeFileSep}
	if !fimCapable {
		ids = engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1}
	}
	desc := &engine.Descriptor{Vocab: fakeVocab, Ctx: 512, Lanes: 2, BOS: fakeBOS, EOS: fakeEOS, EOT: -1,
		EOG: []engine.Token{fakeEOS}, AddBOS: true, FIM: ids}
	text := func(t engine.Token) string {
		if !fimCapable && t > fakeEOS {
			return "" // a vocabulary whose FIM tokens cannot be found by text either
		}
		return string(fakeText{}.AppendPiece(nil, t, true))
	}
	b, err := fim.FromDescriptor(desc, text)
	if err != nil && !errors.Is(err, fim.ErrNoFIM) {
		t.Fatal(err)
	}
	return &task.Model{Name: "fake", Path: "/models/fake.gguf", Desc: desc, Text: fakeText{}, Sched: refusingSched{}, FIM: b}
}
