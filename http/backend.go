package http

import (
	"context"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/metric"
	"superfluid/sched"
)

// Text is the model's vocabulary: tokenizing and rendering text. Any
// goroutine may call it (the cgo engine's text functions qualify).
type Text interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error)
	AppendPiece(dst []byte, tok engine.Token, special bool) []byte
	Detokenize(tokens []engine.Token, special bool) string
}

// Scheduler is what the handlers need of sched.Scheduler.
type Scheduler interface {
	Submit(ctx context.Context, req sched.Request) (*sched.Stream, error)
	Stats() sched.Snapshot
}

// CacheView reports what the prefix cache holds, for /metrics and the
// status endpoints; nil when there is none.
type CacheView interface {
	// AddMetrics adds the cache's samples to a /metrics scrape.
	AddMetrics(p *metric.Page)
}

// Model is a loaded model with everything the handlers need around it.
type Model struct {
	Name  string // what /v1/models and /api/tags call it
	Path  string
	Desc  *engine.Descriptor
	Text  Text
	Sched Scheduler      // nil for an embedding model
	Embed Embedder       // nil for a generation model
	Chat  *chat.Template // nil when the model has no usable chat template
	FIM   *fim.Builder   // nil when the vocabulary cannot fill in the middle
	Cache CacheView      // may be nil
	// ChatRefused says why Chat is nil when a template was refused at load
	// (it failed to parse, or crossed a sandbox bound); chat requests are
	// answered 400 with it.
	ChatRefused error
}
