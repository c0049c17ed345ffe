package ollama

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// A byte-level vocabulary with the synthetic models' special tokens
// (ChatML and Qwen's FIM markers) after the 256 bytes, for the decoder
// tests: chat prompts render and FIM prompts build as
// they do on the real server, without cgo.
var chatmlSpecials = []string{
	"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_suffix|>",
	"<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
}

const chatmlVocab = 256 + 9

func chatmlID(name string) engine.Token {
	for i, s := range chatmlSpecials {
		if s == name {
			return engine.Token(256 + i)
		}
	}
	panic(name)
}

type chatmlText struct{}

func (chatmlText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	out := []engine.Token{}
	for i := 0; i < len(text); {
		if parseSpecial {
			if id, n := chatmlSpecialAt(text[i:]); n > 0 {
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

func chatmlSpecialAt(s string) (engine.Token, int) {
	for i, name := range chatmlSpecials {
		if strings.HasPrefix(s, name) {
			return engine.Token(256 + i), len(name)
		}
	}
	return 0, 0
}

func (chatmlText) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	switch {
	case tok >= 0 && tok < 256:
		return append(dst, byte(tok))
	case special && tok >= 256 && int(tok) < chatmlVocab:
		return append(dst, chatmlSpecials[tok-256]...)
	}
	return dst
}

func (c chatmlText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, t := range tokens {
		b = c.AppendPiece(b, t, special)
	}
	return string(b)
}

// idleSched refuses every request: decoder tests never generate.
type idleSched struct{}

func (idleSched) Submit(context.Context, sched.Request) (*sched.Stream, error) {
	return nil, errors.New("test: no scheduler")
}

func (idleSched) Stats() sched.Snapshot { return sched.Snapshot{} }

// chatmlModel is "tiny" over the ChatML vocabulary with a context of ctx.
func chatmlModel(t testing.TB, ctx int) *task.Model {
	t.Helper()
	desc := &engine.Descriptor{Architecture: "llama", Vocab: chatmlVocab, Ctx: ctx, Lanes: 2, BOS: -1, EOS: chatmlID("<|im_end|>"), EOT: -1,
		EOG: []engine.Token{chatmlID("<|endoftext|>"), chatmlID("<|im_end|>")},
		FIM: engine.FIM{Prefix: chatmlID("<|fim_prefix|>"), Suffix: chatmlID("<|fim_suffix|>"), Middle: chatmlID("<|fim_middle|>"),
			Pad: chatmlID("<|fim_pad|>"), RepoName: chatmlID("<|repo_name|>"), FileSep: chatmlID("<|file_sep|>")}}
	b, err := fim.FromDescriptor(desc, func(t engine.Token) string { return string(chatmlText{}.AppendPiece(nil, t, true)) })
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(chat.ChatML, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &task.Model{Name: "tiny", Path: "/nonexistent/tiny.gguf", Desc: desc, Text: chatmlText{}, Sched: idleSched{}, Chat: tmpl, FIM: b}
}

// requestCtx is a request carrying body, as a handler would see it.
func requestCtx(body []byte) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetBody(body)
	return ctx
}

// checkRefusal checks that a decoder's error is a client error the API
// can show: a 4xx (or 501 for what the model cannot do) with a message.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var ae *wire.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a wire.Error", err, err)
	}
	if (ae.Status < 400 || ae.Status > 499) && ae.Status != 501 || ae.Msg == "" {
		t.Fatalf("refusal %+v is not a client error with a message", ae)
	}
}

// checkSpec checks what a validated request hands to the scheduler: a
// prompt of the model's tokens that fits the context with room left, and
// limits and sampling the scheduler accepts.
func checkSpec(t *testing.T, m *task.Model, g *task.Request) {
	t.Helper()
	if len(g.Prompt) == 0 || len(g.Prompt) >= m.Desc.Ctx {
		t.Fatalf("prompt of %d tokens for a context of %d", len(g.Prompt), m.Desc.Ctx)
	}
	for _, tok := range g.Prompt {
		if tok < 0 || int(tok) >= m.Desc.Vocab {
			t.Fatalf("prompt token %d outside the vocabulary", tok)
		}
	}
	s := g.Sampling
	if g.MaxTokens < 0 || int64(g.MaxTokens) > math.MaxUint32 || int(g.Class) >= sched.NumClasses || g.Logprobs < 0 || g.Logprobs > engine.MaxLogprobs ||
		s.Temperature < 0 || s.TopK < 0 || s.TopP <= 0 || s.TopP > 1 || s.MinP < 0 || s.MinP > 1 || s.RepeatPenalty <= 0 || s.PenaltyLastN < -1 {
		t.Fatalf("spec the scheduler would refuse: %+v", g)
	}
	if msg := unschedulable(m.Desc, &sched.Request{Prompt: g.Prompt, Class: g.Class, MaxTokens: g.MaxTokens, Sampling: g.Sampling, Logprobs: g.Logprobs, Bias: g.Bias}); msg != "" {
		t.Fatalf("spec the scheduler would refuse (%s): %+v", msg, g)
	}
}

// unschedulable mirrors sched.Request's validation (sched/request.go):
// what the scheduler would refuse at Submit. "" when the request is fine.
func unschedulable(d *engine.Descriptor, r *sched.Request) string {
	switch {
	case len(r.Prompt) == 0 || len(r.Prompt) >= d.Ctx:
		return "prompt length"
	case int(r.Class) >= sched.NumClasses:
		return "class"
	case r.MaxTokens < 0 || int64(r.MaxTokens) > math.MaxUint32:
		return "max tokens"
	case r.Logprobs < 0 || r.Logprobs > engine.MaxLogprobs:
		return "logprobs"
	}
	for _, t := range r.Prompt {
		if t < 0 || int(t) >= d.Vocab {
			return "prompt token"
		}
	}
	for _, b := range r.Bias {
		if b.Token < 0 || int(b.Token) >= d.Vocab || math.IsNaN(float64(b.Bias)) {
			return "bias"
		}
	}
	if engine.BansEveryToken(r.Bias, d.Vocab) {
		return "bias bans every token"
	}
	s := r.Sampling
	if s == (engine.Sampling{}) {
		return ""
	}
	if s.Temperature > 0 && s.Temperature < engine.MinTemperature {
		return "temperature below engine.MinTemperature"
	}
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	if !finite(s.Temperature) || !finite(s.TopP) || !finite(s.MinP) || !finite(s.RepeatPenalty) ||
		!finite(s.FrequencyPenalty) || !finite(s.PresencePenalty) || s.TopK < 0 || s.TopP <= 0 || s.TopP > 1 ||
		s.MinP < 0 || s.MinP > 1 || s.RepeatPenalty <= 0 || s.PenaltyLastN < -1 {
		return "sampling"
	}
	return ""
}

// testHost is the server as the decoder tests need it: the class header
// over the default class (chat), a version, no FIM model.
type testHost struct {
	wire.Host
	version string
	cache   *task.CompletionCache
}

func (h testHost) Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	return wire.Class(ctx, field, sched.Chat)
}

func (h testHost) Settings() wire.Settings { return wire.Settings{Version: h.version} }

func (h testHost) FIMFor(_ context.Context, m *task.Model) (*task.Model, func()) { return m, func() {} }

func (h testHost) CompletionCache() *task.CompletionCache { return h.cache }

func (h testHost) RequestContext(ctx *fasthttp.RequestCtx) (context.Context, func()) {
	return context.WithCancel(context.Background())
}

func testAPI() *api { return &api{host: testHost{cache: task.NewCompletionCache(8)}} }
