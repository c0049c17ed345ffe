package http

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"

	"superfluid/http/wire"
)

// Models is the set of models a server answers for: those loaded and those
// it can load on demand. Every route that generates, tokenizes or describes
// a model resolves the request's model through Acquire (see route), so the
// four APIs share one way of naming a model. Any goroutine may call it.
type Models interface {
	// Acquire returns the model want names ("" names the default), loading
	// it first when it is not loaded. The model stays loaded until release
	// is called; release applies want's keep-alive. An unknown name is an
	// error wrapping ErrModelNotFound, a load that cannot fit one wrapping
	// ErrModelNoRoom.
	Acquire(ctx context.Context, want ModelWant) (m *Model, release func(), err error)
	// Available lists every model that can be asked for, loaded or not.
	Available() []ModelInfo
	// Loaded lists the models loaded now.
	Loaded() []LoadedModel
	// FIMName is the model that answers every fill-in-the-middle request
	// whatever it names ("" when there is none: each request's own model).
	FIMName() string
}

// ModelWant is what a request asks of the registry.
type ModelWant struct {
	Name string // as the request wrote it; "" for the default model
	// FIM marks a fill-in-the-middle request (/infill, a suffix on OpenAI
	// or Ollama), which the FIM model answers when there is one.
	FIM bool
	// KeepAlive is how long the model stays loaded after this request
	// (Ollama's keep_alive: 0 unloads it once idle, negative never
	// expires); HasKeepAlive says the request set it.
	KeepAlive    time.Duration
	HasKeepAlive bool
}

// ModelInfo is one model that can be asked for.
type ModelInfo struct {
	Name     string
	Path     string
	Size     int64 // the file's bytes
	Modified time.Time
	Digest   string // gguf.ModelDigest of the file
	Loaded   *Model // nil when not loaded
}

// LoadedModel is one model loaded now.
type LoadedModel struct {
	Model *Model
	// Size is the memory it holds, measured after loading: the weights,
	// the KV pool and the host cache budget.
	Size      int64
	ExpiresAt time.Time // zero: never unloaded for idleness
	InFlight  int       // requests holding it
	Pinned    bool      // a resident (--model, --fim-model) model LRU never unloads
}

var (
	// ErrModelNotFound is an Acquire of a name no model answers to, or a
	// ModelStore's of a name nothing in the directory has (404).
	ErrModelNotFound = wire.ErrModelNotFound
	// ErrModelNoRoom is an Acquire whose load cannot fit within the model
	// count or the memory budget, even after unloading every idle
	// on-demand model.
	ErrModelNoRoom = errors.New("no room to load the model")
)

// SameModelName reports whether a request's name asks for the model
// called name: equal, or equal once Ollama's default tag ":latest" is
// dropped from either.
func SameModelName(asked, name string) bool {
	return asked == name || strings.TrimSuffix(asked, ":latest") == strings.TrimSuffix(name, ":latest")
}

// singleModel is the registry of a server given one model (SetModel):
// every name but its own is unknown; the listing adds the models
// directory's (SetModelStore), which it cannot load.
type singleModel struct {
	m   *Model
	srv *Server
}

func (s singleModel) Acquire(_ context.Context, want ModelWant) (*Model, func(), error) {
	if want.Name != "" && !SameModelName(want.Name, s.m.Name) {
		return nil, nil, ErrModelNotFound
	}
	return s.m, func() {}, nil
}

func (s singleModel) Available() []ModelInfo {
	size, modified := s.m.FileFacts()
	out := []ModelInfo{{Name: s.m.Name, Path: s.m.Path, Size: size, Modified: modified, Digest: s.m.Desc.Identity, Loaded: s.m}}
	st := s.srv.modelStore()
	if st == nil {
		return out
	}
	stored, err := st.List(context.Background())
	if err != nil {
		slog.Warn("listing the models directory", "err", err)
	}
	for _, sm := range stored {
		if !sameFile(sm.Path, s.m.Path) {
			out = append(out, ModelInfo{Name: sm.Name, Path: sm.Path, Size: sm.Size, Modified: sm.Modified, Digest: sm.SHA256})
		}
	}
	return out
}

func (s singleModel) Loaded() []LoadedModel {
	return []LoadedModel{{Model: s.m, Size: int64(s.m.Desc.ModelBytes), Pinned: true}}
}

func (s singleModel) FIMName() string { return "" }

// modelsBox lets an interface sit in an atomic.Pointer.
type modelsBox struct{ Models }

// sameFile reports whether two paths name one file.
func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
