package openai

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// testHost is the transport as the handlers see it, without a server:
// the request runs under a context of its own, a stream is written
// nowhere, and the class comes from the header or the zero class.
type testHost struct{ cache *task.CompletionCache }

func (testHost) RequestContext(*fasthttp.RequestCtx) (context.Context, func()) {
	return context.WithCancel(context.Background())
}

func (testHost) Stream(_ *fasthttp.RequestCtx, sse bool, begin func(rctx context.Context) error,
	produce func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter)) error {
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if begin != nil {
		if err := begin(rctx); err != nil {
			return err
		}
	}
	ew := wire.NewEventWriter(wire.OpenAI, sse)
	ew.Attach(bufio.NewWriter(io.Discard))
	produce(rctx, cancel, ew)
	return nil
}

func (testHost) Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return wire.Class(ctx, field, 0)
}

func (h testHost) CompletionCache() *task.CompletionCache { return h.cache }
func (testHost) FIMModel() string                         { return "" }
func (testHost) Available() []wire.ModelEntry             { return nil }
func (testHost) Loaded() []wire.LoadedEntry               { return nil }
func (testHost) CacheStatus(*fasthttp.RequestCtx) any     { return nil }
func (testHost) Settings() wire.Settings                  { return wire.Settings{} }
func (testHost) FIMFor(_ context.Context, m *task.Model) (*task.Model, func()) {
	return m, func() {}
}
func (testHost) Pinner(*fasthttp.RequestCtx) wire.CachePinner                          { return nil }
func (testHost) Store() wire.ModelStore                                                { return nil }
func (testHost) Stopping() context.Context                                             { return context.Background() }
func (testHost) ProgressBody(_ *fasthttp.RequestCtx, body io.ReadCloser) io.ReadCloser { return body }

// testAPI is the handlers over testHost, with a completion cache of size.
func testAPI(size int) *api {
	return &api{host: testHost{cache: task.NewCompletionCache(size)}, stores: &Stores{}}
}

// requestCtx is a request carrying body, as a handler would see it.
func requestCtx(body []byte) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetBody(body)
	return ctx
}

// A byte-level vocabulary for tests of the completions decoder: ids
// 0–255 are bytes, then BOS, EOS and Qwen's FIM tokens.
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

// stubVocab is a byte-level vocabulary plus an end-of-generation token.
const (
	stubVocab = 257
	stubEOS   = 256
)

// stubText tokenizes one token per byte.
type stubText struct{}

func (stubText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	out := make([]engine.Token, 0, len(text))
	for i := 0; i < len(text); i++ {
		out = append(out, engine.Token(text[i]))
	}
	return out, nil
}

func (stubText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	if tok >= 0 && tok < 256 {
		return append(dst, byte(tok))
	}
	return dst
}

func (t stubText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, tok := range tokens {
		b = t.AppendPiece(b, tok, special)
	}
	return string(b)
}

// errStubRefused is what stubSched answers every submission with.
var errStubRefused = errors.New("stub: not scheduling")

// stubSched refuses every request after keeping it, so that a test can
// check what the handlers would have scheduled.
type stubSched struct {
	mu   sync.Mutex
	last []sched.Request
}

func (s *stubSched) Submit(_ context.Context, req sched.Request) (*sched.Stream, error) {
	s.mu.Lock()
	s.last = append(s.last, req)
	s.mu.Unlock()
	return nil, errStubRefused
}

func (s *stubSched) Stats() sched.Snapshot { return sched.Snapshot{} }

// taken returns and forgets the requests submitted so far.
func (s *stubSched) taken() []sched.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.last
	s.last = nil
	return out
}

// stubModel is a model over stubText with ChatML and a small context.
func stubModel(t testing.TB) (*task.Model, *stubSched) {
	t.Helper()
	tmpl, err := chat.Parse(chat.ChatML, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sc := &stubSched{}
	desc := &engine.Descriptor{Vocab: stubVocab, Ctx: 256, Lanes: 2, Batch: 64, BOS: -1, EOS: stubEOS, EOT: -1, EOG: []engine.Token{stubEOS},
		FIM: engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1}, Identity: "0123456789abcdef"}
	return &task.Model{Name: "stub", Path: "/models/stub.gguf", Desc: desc, Text: stubText{}, Sched: sc, Chat: tmpl}, sc
}
