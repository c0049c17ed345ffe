package wire

import (
	"context"
	"errors"
	"time"
)

// ModelStore is the models directory as Ollama's lifecycle endpoints
// (/api/pull, /api/delete, and the listing of /api/tags) reach it. The
// server words what it reports in each API's terms; the store knows only
// files. app implements it over package pull.
type ModelStore interface {
	// Pull fetches the model name refers to into the directory. It calls
	// progress (on its own goroutine, never concurrently) first with
	// PullResolving once it has accepted the name, then as the download
	// moves; an error before that first call is the name's fault or the
	// directory's, one after it the download's. When ctx ends the pull
	// stops and keeps what it has for the next pull to resume.
	Pull(ctx context.Context, name string, progress func(PullProgress)) error
	// Delete removes the named model's files.
	Delete(ctx context.Context, name string) error
	// List returns the directory's models.
	List(ctx context.Context) ([]StoredModel, error)
}

// Errors a ModelStore (and the model registry) wraps so that the server
// can answer with the right status.
var (
	// ErrModelNotFound is an Acquire of a name no model answers to, or a
	// ModelStore's of a name nothing in the directory has (404).
	ErrModelNotFound = errors.New("model not found")
	// ErrBadModelName: the name cannot name a model here (400): a path, a
	// reference of a form the store cannot fetch.
	ErrBadModelName = errors.New("not a model name")
	// ErrModelInUse: the model is serving and cannot be removed (409).
	ErrModelInUse = errors.New("model in use")
)

// PullPhase is what a pull is doing.
type PullPhase int

const (
	PullResolving   PullPhase = iota // finding the file the name refers to
	PullDownloading                  // bytes arriving: Completed of Total
	PullVerifying                    // checking the complete file's digest and header
	PullWriting                      // recording where the file came from, naming it
)

// PullProgress is one report of a pull.
type PullProgress struct {
	Phase PullPhase
	// File is the name of the file being fetched (PullDownloading on).
	File string
	// SHA256 is the file's expected digest in hex, "" while unknown.
	SHA256 string
	// Total is the file's size (0 while unknown); Completed the bytes on
	// disk.
	Total, Completed int64
}

// StoredModel is a model of the directory.
type StoredModel struct {
	Name     string // its local name, without .gguf
	Path     string
	Size     int64
	Modified time.Time
	SHA256   string // hex; "" for a file copied in by hand
}
