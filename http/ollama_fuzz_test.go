package http

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
// (ChatML and Qwen's FIM markers) after the 256 bytes, for the Ollama and
// Anthropic decoder tests: chat prompts render and FIM prompts build as
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
func chatmlModel(t testing.TB, ctx int) *Model {
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
	return &Model{Model: task.Model{Name: "tiny", Path: "/nonexistent/tiny.gguf", Desc: desc, Text: chatmlText{}, Sched: idleSched{}, Chat: tmpl, FIM: b}}
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
		t.Fatalf("error %v (%T) is not an apiError", err, err)
	}
	if (ae.Status < 400 || ae.Status > 499) && ae.Status != 501 || ae.Msg == "" {
		t.Fatalf("refusal %+v is not a client error with a message", ae)
	}
}

// checkSpec checks what a validated request hands to the scheduler: a
// prompt of the model's tokens that fits the context with room left, and
// limits and sampling the scheduler accepts.
func checkSpec(t *testing.T, m *Model, g *task.Request) {
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

var ollamaGenerateSeeds = []string{
	`{"model":"tiny","prompt":"hello"}`,
	`{"model":"tiny:latest","prompt":"hello","system":"be brief","stream":false,"options":{"temperature":0,"num_predict":8,"stop":["\n"]}}`,
	`{"model":"tiny","prompt":"<|im_start|>user\nhi<|im_end|>\n","raw":true,"options":{"seed":-1,"top_k":0,"top_p":1,"min_p":0.05}}`,
	`{"model":"tiny","prompt":"def f(","suffix":"\n  return 1\n","options":{"num_predict":16,"num_ctx":64,"temperature":0}}`,
	`{"model":"tiny","prompt":"","suffix":"x"}`,
	`{"model":"tiny","keep_alive":0}`,
	`{"model":"tiny","prompt":"again","context":[1,2,3],"options":{"repeat_penalty":1.1,"repeat_last_n":-1}}`,
	`{"model":"tiny","prompt":"hi","logprobs":true,"top_logprobs":3,"options":{"num_ctx":10}}`,
	`{"model":"tiny","prompt":"hi","format":"json","images":["aGk="]}`,
	`{"model":"tiny","prompt":"hi","options":{"temperature":"hot","num_predict":1e30,"mirostat":2}}`,
	`{"model":"tiny","prompt":"hi","think":"high","keep_alive":"5m"}`,
	// Poison values: each is normalized or refused before the scheduler.
	`{"model":"tiny","prompt":"hi","options":{"temperature":1e-40,"top_p":1e-50,"repeat_penalty":1e-40}}`,
	`{"model":"tiny","prompt":"hi","options":{"temperature":1e400,"seed":1e30,"num_predict":1e15,"repeat_last_n":1e15}}`,
	`{"model":"tiny","prompt":"hi","top_logprobs":1e30,"options":{"typical_p":0.5,"num_ctx":1e30}}`,
	`{"model":"tiny","prompt":"` + strings.Repeat("x", 16*128+1) + `","raw":true}`,
}

// Decoding and validating any /api/generate body never panics: it is
// refused with a client error, or it becomes a load answer or a spec the
// scheduler accepts.
func FuzzOllamaGenerateRequest(f *testing.F) {
	for _, s := range ollamaGenerateSeeds {
		f.Add([]byte(s))
	}
	m := chatmlModel(f, 128)
	srv, err := NewServer(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := requestCtx(body)
		var req ollamaGenerateRequest
		if err := wire.DecodeJSON(ctx, &req); err != nil {
			checkRefusal(t, err)
			return
		}
		job, err := srv.ollamaGenerateJob(ctx, m, &req)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkOllamaJob(t, m, job)
		if job.g != nil && (job.g.Class == sched.FIM) != (req.Suffix != "") {
			t.Fatalf("class %v for suffix %q", job.g.Class, req.Suffix)
		}
	})
}

var ollamaChatSeeds = []string{
	`{"model":"tiny","messages":[{"role":"user","content":"hello"}]}`,
	`{"model":"tiny","messages":[{"role":"System","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}],"stream":false}`,
	`{"model":"tiny","messages":[{"role":"tool","content":"42","tool_name":"f"}],"options":{"num_predict":-2}}`,
	`{"model":"tiny","messages":[]}`,
	`{"model":"tiny","messages":[{"role":"user","content":"hi","images":["aGk="]}],"tools":[{"type":"function"}]}`,
	`{"model":"tiny","messages":[{"role":"assistant","content":"x","tool_calls":[{"function":{"name":"f"}}]}]}`,
	`{"model":"nope","messages":[{"role":"user","content":"hi"}],"format":{"type":"object"}}`,
	`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"think":true,"options":{"temperature":5e-324}}`,
	`{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("x", 16*128+1) + `"}]}`,
}

// Decoding and validating any /api/chat body never panics.
func FuzzOllamaChatRequest(f *testing.F) {
	for _, s := range ollamaChatSeeds {
		f.Add([]byte(s))
	}
	m := chatmlModel(f, 128)
	srv, err := NewServer(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := requestCtx(body)
		var req ollamaChatRequest
		if err := wire.DecodeJSON(ctx, &req); err != nil {
			checkRefusal(t, err)
			return
		}
		job, err := srv.ollamaChatJob(ctx, m, &req)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkOllamaJob(t, m, job)
	})
}

func checkOllamaJob(t *testing.T, m *Model, job *ollamaJob) {
	t.Helper()
	if job.g == nil {
		if job.loadReason != "load" && job.loadReason != "unload" {
			t.Fatalf("a job with nothing to generate and done_reason %q", job.loadReason)
		}
		return
	}
	checkSpec(t, job.model, job.g)
	if job.model.Desc.Ctx > m.Desc.Ctx || job.g.MaxTokens > job.model.Desc.Ctx-len(job.g.Prompt) && job.model != m {
		t.Fatalf("window %d, limit %d for a prompt of %d", job.model.Desc.Ctx, job.g.MaxTokens, len(job.g.Prompt))
	}
}
