package task

import (
	"context"

	"superfluid/engine"
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
}

// Model is a loaded model as the core generates with it: its name, the
// engine's description of it, its vocabulary and its scheduler (nil for an
// embedding model).
type Model struct {
	Name  string
	Desc  *engine.Descriptor
	Text  Text
	Sched Scheduler
}
