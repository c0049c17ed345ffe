package tasktest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/sched"
	"superfluid/task"
)

// StubVocab is a byte-level vocabulary plus an end-of-generation token.
const (
	StubVocab = 257
	StubEOS   = 256
)

// StubText tokenizes one token per byte.
type StubText struct{}

func (StubText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	out := make([]engine.Token, 0, len(text))
	for i := 0; i < len(text); i++ {
		out = append(out, engine.Token(text[i]))
	}
	return out, nil
}

func (StubText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	if tok >= 0 && tok < 256 {
		return append(dst, byte(tok))
	}
	return dst
}

func (t StubText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, tok := range tokens {
		b = t.AppendPiece(b, tok, special)
	}
	return string(b)
}

// ErrStubRefused is what StubSched answers every submission with.
var ErrStubRefused = errors.New("stub: not scheduling")

// StubSched refuses every request after keeping it, so that a test can
// check what the handlers would have scheduled.
type StubSched struct {
	mu   sync.Mutex
	last []sched.Request
}

func (s *StubSched) Submit(_ context.Context, req sched.Request) (*sched.Stream, error) {
	s.mu.Lock()
	s.last = append(s.last, req)
	s.mu.Unlock()
	return nil, ErrStubRefused
}

func (s *StubSched) Stats() sched.Snapshot { return sched.Snapshot{} }

// Expect: no runner here gathers bursts.
func (s *StubSched) Expect() func() { return func() {} }

// Taken returns and forgets the requests submitted so far.
func (s *StubSched) Taken() []sched.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.last
	s.last = nil
	return out
}

// StubModel is "stub" over StubText with ChatML and a context of 256,
// scheduling into the StubSched it returns.
func StubModel(t testing.TB) (*task.Model, *StubSched) {
	t.Helper()
	tmpl, err := chat.Parse(chat.ChatML, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sc := &StubSched{}
	desc := &engine.Descriptor{Vocab: StubVocab, Ctx: 256, Lanes: 2, Batch: 64, BOS: -1, EOS: StubEOS, EOT: -1, EOG: []engine.Token{StubEOS},
		FIM: engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1}, Identity: "0123456789abcdef"}
	return &task.Model{Name: "stub", Path: "/models/stub.gguf", Desc: desc, Text: StubText{}, Sched: sc, Chat: tmpl}, sc
}
