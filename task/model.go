package task

import (
	"context"
	"log/slog"
	"slices"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/reply"
	"superfluid/sched"
)

// Text is the model's vocabulary: tokenizing and rendering text. Any
// goroutine may call it (the cgo engine's text functions qualify).
type Text interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error)
	AppendPiece(dst []byte, tok engine.Token, special bool) []byte
	Detokenize(tokens []engine.Token, special bool) string
}

// Scheduler is what the core needs of sched.Scheduler.
type Scheduler interface {
	Submit(ctx context.Context, req sched.Request) (*sched.Stream, error)
	Stats() sched.Snapshot
	// Expect announces a request on its way to Submit (sched.Scheduler's:
	// an idle runner gathers a burst while some are).
	Expect() (arrived func())
}

// ClassRefuser is a Scheduler that refuses some classes outright (an API
// key's policy): the completion cache answers none of their requests.
type ClassRefuser interface {
	RefusesClass(c sched.Class) bool
}

// Model is a loaded model as the request core generates with it, with
// what is known about it from the moment it loads (Prepare).
type Model struct {
	Name  string // what /v1/models and /api/tags call it
	Path  string
	Desc  *engine.Descriptor
	Text  Text
	Sched Scheduler      // nil for an embedding model
	Embed Embedder       // nil for a generation model
	Chat  *chat.Template // nil when the model has no usable chat template
	FIM   *fim.Builder   // nil when the vocabulary cannot fill in the middle
	// LoRA is the model's LoRA adapters; nil when it was loaded with none.
	LoRA *Adapters
	// FIMGate, when set, is the server's gate every FIM-class request
	// passes before it is queued (Start): the rate bucket, supersession.
	FIMGate *FIMGate
	// Media is the model's projector (vision, audio or both); nil when it
	// has none (images and audio are then refused, naming the field).
	Media Projector
	// ChatRefused says why Chat is nil when a template was refused at load
	// (it failed to parse, or crossed a sandbox bound); chat requests are
	// answered 400 with it.
	ChatRefused error
	// known is what Prepare found; the copies of a Model that narrow its
	// window (Ollama's num_ctx) share it, and it goes with the Model when
	// the model unloads.
	known *knowledge
}

// knowledge is what is computed about a model once, when it loads.
type knowledge struct {
	reply    ReplyFormat
	defaults Defaults
	fimStops []engine.Token
}

// Defaults are the truncation samplers a request that omits them gets:
// the model file's recommendation, else llama-server's (SamplingDefaults).
type Defaults struct {
	TopK       int32
	TopP, MinP float32
}

// ReplyFormat is how a model's replies are read: the format its template
// was detected as (reply.Detect), and the marker tokens of that format,
// which are rendered as text so that the reply parser sees them.
type ReplyFormat struct {
	Format reply.Format
	Show   []engine.Token
}

// Prepare computes what the core needs to know about m before it serves:
// call it once the Model's fields are set, before any request sees it.
func (m *Model) Prepare() {
	k := &knowledge{reply: m.detectReplyFormat(), defaults: m.readDefaults(), fimStops: m.readFIMStops()}
	if m.Chat != nil {
		slog.Info("chat format", "model", m.Name, "format", k.reply.Format.Name, "reasoning", k.reply.Format.HasReasoning())
	}
	m.known = k
}

// Reply is m's reply format. A Model that was not prepared (tests build
// them by hand) has it detected on each call.
func (m *Model) Reply() ReplyFormat {
	if m.known != nil {
		return m.known.reply
	}
	return m.detectReplyFormat()
}

// Defaults are m's sampling defaults (see Defaults).
func (m *Model) Defaults() Defaults {
	if m.known != nil {
		return m.known.defaults
	}
	return m.readDefaults()
}

// FIMStops are the tokens of m's FIM format, which end a fill-in-the-middle
// generation like an end of generation; none when m cannot fill in the
// middle.
func (m *Model) FIMStops() []engine.Token {
	if m.known != nil {
		return m.known.fimStops
	}
	return m.readFIMStops()
}

func (m *Model) readDefaults() Defaults {
	var d Defaults
	d.TopK, d.TopP, d.MinP = SamplingDefaults(m.Desc)
	return d
}

func (m *Model) readFIMStops() []engine.Token {
	if m.FIM == nil {
		return nil
	}
	return m.FIM.StopTokens()
}

func (m *Model) detectReplyFormat() ReplyFormat {
	if m.Chat == nil {
		return ReplyFormat{Format: reply.Format{Name: "none"}}
	}
	f := ReplyFormat{Format: reply.Detect(m.Chat, m.Desc.ChatTemplate)}
	for _, mk := range f.Format.Markers() {
		if toks, err := m.Text.Tokenize(mk, false, true); err == nil && len(toks) == 1 && !slices.Contains(f.Show, toks[0]) {
			f.Show = append(f.Show, toks[0])
		}
	}
	return f
}
