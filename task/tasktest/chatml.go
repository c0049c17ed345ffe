// Package tasktest holds what tests of the API packages share about the
// request core: a model whose chat template and FIM format render as the
// real server's do without cgo (ChatMLModel), and the check that a
// validated request is one the scheduler accepts (CheckSpec), with the
// byte-level fake and stub models and the request helpers the API
// packages' tests share.
package tasktest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/sched"
	"superfluid/task"
)

// A byte-level vocabulary with the synthetic models' special tokens
// (ChatML and Qwen's FIM markers) after the 256 bytes: chat prompts render
// and FIM prompts build as they do on the real server.
var chatmlSpecials = []string{
	"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_suffix|>",
	"<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
}

// ChatMLVocab is the vocabulary's size: the bytes and the specials.
const ChatMLVocab = 256 + 9

// ChatMLID is the token of a special, by name.
func ChatMLID(name string) engine.Token {
	for i, s := range chatmlSpecials {
		if s == name {
			return engine.Token(256 + i)
		}
	}
	panic(name)
}

// ChatMLText tokenizes byte by byte, reading the specials as one token
// each when asked to.
type ChatMLText struct{}

func (ChatMLText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	return appendBytes([]engine.Token{}, text, parseSpecial, specialAt), nil
}

// appendBytes appends text's tokens in a byte-level vocabulary: a token a
// byte, but for the specials special finds when parseSpecial.
func appendBytes(out []engine.Token, text string, parseSpecial bool, special func(string) (engine.Token, int)) []engine.Token {
	for i := 0; i < len(text); {
		if parseSpecial {
			if id, n := special(text[i:]); n > 0 {
				out = append(out, id)
				i += n
				continue
			}
		}
		out = append(out, engine.Token(text[i]))
		i++
	}
	return out
}

func specialAt(s string) (engine.Token, int) {
	for i, name := range chatmlSpecials {
		if strings.HasPrefix(s, name) {
			return engine.Token(256 + i), len(name)
		}
	}
	return 0, 0
}

func (ChatMLText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	switch {
	case tok >= 0 && tok < 256:
		return append(dst, byte(tok))
	case special && tok >= 256 && int(tok) < ChatMLVocab:
		return append(dst, chatmlSpecials[tok-256]...)
	}
	return dst
}

func (c ChatMLText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, t := range tokens {
		b = c.AppendPiece(b, t, special)
	}
	return string(b)
}

// idleSched refuses every request: decoder tests never generate.
type idleSched struct{}

func (idleSched) Submit(context.Context, sched.Request) (*sched.Stream, error) {
	return nil, errors.New("tasktest: no scheduler")
}

func (idleSched) Stats() sched.Snapshot { return sched.Snapshot{} }

// Expect: no runner here gathers bursts.
func (idleSched) Expect() func() { return func() {} }

// ChatMLModel is "tiny" over the ChatML vocabulary with a context of ctx,
// the ChatML template and Qwen's FIM tokens; its scheduler refuses
// everything.
func ChatMLModel(t testing.TB, ctx int) *task.Model {
	t.Helper()
	desc := &engine.Descriptor{Architecture: "llama", Vocab: ChatMLVocab, Ctx: ctx, Lanes: 2, BOS: -1, EOS: ChatMLID("<|im_end|>"), EOT: -1,
		EOG: []engine.Token{ChatMLID("<|endoftext|>"), ChatMLID("<|im_end|>")},
		FIM: engine.FIM{Prefix: ChatMLID("<|fim_prefix|>"), Suffix: ChatMLID("<|fim_suffix|>"), Middle: ChatMLID("<|fim_middle|>"),
			Pad: ChatMLID("<|fim_pad|>"), RepoName: ChatMLID("<|repo_name|>"), FileSep: ChatMLID("<|file_sep|>")}}
	b, err := fim.FromDescriptor(desc, func(t engine.Token) string { return string(ChatMLText{}.AppendPiece(nil, t, true)) })
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(chat.ChatML, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &task.Model{Name: "tiny", Path: "/nonexistent/tiny.gguf", Desc: desc, Text: ChatMLText{}, Sched: idleSched{}, Chat: tmpl, FIM: b}
}
