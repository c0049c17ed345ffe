// Package app assembles a serving stack — engine, prefix cache, scheduler,
// HTTP server — from options, the way `superfluid serve` runs it. Tests and
// benchmarks start the same stack through it on a real socket.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"superfluid/batch"
	"superfluid/batches"
	"superfluid/cgo"
	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/gguf"
	sfhttp "superfluid/http"
	"superfluid/kv"
	"superfluid/metric"
	"superfluid/sched"
	"superfluid/session"
	"superfluid/task"
	"superfluid/tracing"
)

// Options configure a stack. Zero values take the defaults noted.
type Options struct {
	ModelPath string // the default model: requests that name none get it
	Alias     string // model name clients see; default: file name without .gguf
	// LoRA are adapters loaded with the default model (--lora).
	LoRA []LoRAFile
	// MMProj is the default model's projector (--mmproj): vision, audio or both.
	MMProj string
	// Models are more resident models, loaded at start beside ModelPath
	// and kept loaded (unless a request's keep_alive says otherwise).
	Models []ModelSpec
	// ModelsDir is where models a request names are loaded from on
	// demand (`superfluid pull`ed or copied there), which Ollama's
	// /api/pull and /api/delete work on; "" loads none and turns those off.
	ModelsDir string
	// MaxModels bounds the models loaded at once (default 3, and never
	// fewer than the resident ones); the least recently used idle
	// on-demand model is unloaded for another.
	MaxModels int
	// MemoryBudget bounds the bytes loaded models hold (weights, KV pool,
	// host cache budget each); 0: 80% of MemAvailable at start, <0: none.
	MemoryBudget int64
	// KeepAlive is how long an on-demand model stays loaded after its
	// last request when the request sets no keep_alive (default 5m, as
	// Ollama's; <0: for ever).
	KeepAlive time.Duration
	// FIMModelPath, when set, is a resident model that answers every
	// fill-in-the-middle request, whatever model it names.
	FIMModelPath string
	Lanes        int    // default 4
	Ctx          int    // default 16384
	Seqs         int    // 0: engineSeqs chooses for the model
	Threads      int    // default: all cores
	Batch        int    // a step's cap; 0: cgo's default for a generation model, 512 for an embedding one
	UBatch       int    // the engine's micro-batch; default cgo.DefaultUBatch
	CacheTypeK   string // the K cache's type, as llama.cpp names it; default f16
	CacheTypeV   string // the V cache's type; default f16
	FlashAttn    string // on (default), off or auto; see cgo.Options
	NoRepack     bool   // weights in the file's layout, not repacked; see cgo.Options
	Poll         int    // the CPU threads' polling level; see cgo.Options
	HostCache    int64  // bytes for evicted conversation state; default 1 GiB, <0 off

	// ChatTemplateFile, when set, is a Jinja chat template that replaces
	// the one the GGUF carries; one that does not parse fails Start.
	ChatTemplateFile string

	// The disk tier (package park). ParkDir "" is off; `superfluid serve`
	// defaults it to the user's cache directory.
	ParkDir    string
	ParkBudget int64         // bytes; default 8 GiB, <0 unbounded
	ParkEager  bool          // park every conversation as its request ends
	ParkIdle   time.Duration // park and evict conversations idle this long; 0: never
	ParkLossy  bool          // demote parked f16 KV state to 8 bits

	// DataDir is where the batch API (/v1/files, /v1/batches) keeps its
	// files and batches, which survive restarts. "" turns the batch API
	// off: its routes answer that it is.
	DataDir string
	// WrapBatchDoer, when set, wraps the Doer batches send their requests
	// through (tests hold a batch at a known point with it).
	WrapBatchDoer func(batch.Doer) batch.Doer
	// Disk bounds what requests may leave on disk.
	Disk DiskQuotas

	// Pressure is the watch on the machine's memory (app/pressure.go).
	Pressure PressureOptions

	// FIM bounds the rate of inline completions (task.FIMRate: the zero
	// value takes its defaults); one gate serves every model.
	FIM task.FIMRate

	Sched sched.Config  // Lanes is filled from Lanes
	HTTP  sfhttp.Config // FIMGate is made from FIM
	// Tracing, when set (tracing.FromEnv), traces every request: the
	// HTTP server's spans and each model's scheduler observer. The stack
	// owns it: Close exports what is queued and shuts it down.
	Tracing *tracing.Tracing
}

// Stack is the models of one process serving over HTTP.
type Stack struct {
	// Engine, Cache, Sched and Model are the default model's as loaded at
	// start (a request's keep_alive may unload it later; Models then
	// loads it anew on demand).
	Engine *cgo.Engine
	Cache  *kv.Cache
	Sched  *sched.Scheduler
	Model  *sfhttp.Model
	Models *Registry
	Server *sfhttp.Server
	// Batches is the batch API's store; nil when it is off.
	Batches *batches.Store
	// sessions is the conversations' store under --data-dir (nil: none,
	// or kept in memory).
	sessions *session.Store
	chains   *session.Store // the stored responses' chains (nil: none)

	closeOnce sync.Once
	closeErr  error
	serveDone chan struct{} // closed when Serve returns, with serveErr set
	serveErr  error
	ln        net.Listener
	addr      net.Addr
	tracing   *tracing.Tracing // shut down last, after every span ended
	pressure  *pressureWatch   // nil: off, or a stack that only answers in-process
}

// Start listens on addr (e.g. "127.0.0.1:0"), serves 503 while the model
// loads, loads it, and returns once the stack is ready.
func Start(addr string, o Options) (*Stack, error) {
	o.HTTP.Tracing = o.Tracing
	if err := o.gateFIM(); err != nil {
		return nil, err
	}
	watch := newPressureWatch(&o)
	srv, err := sfhttp.NewServer(o.HTTP)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	s := &Stack{Server: srv, serveDone: make(chan struct{}), addr: ln.Addr(), ln: ln, tracing: o.Tracing, pressure: watch}
	go func() { s.serveErr = srv.Serve(ln); close(s.serveDone) }()
	slog.Info("listening; loading the model", "addr", ln.Addr().String())
	if err := s.load(o); err != nil {
		srv.Shutdown(context.Background())
		ln.Close() // Serve may not have registered ln yet: Shutdown would miss it
		<-s.serveDone
		return nil, err
	}
	watch.start(s.Models)
	s.openResponses(o) // before the model: no request may store in memory first
	s.restorePins()
	s.openModelStore(o)
	srv.SetModels(s.Models)
	s.openBatches(o)
	return s, nil
}

// Load loads a stack that listens nowhere: its server answers only
// in-process, through Server.AnswerBatch (`superfluid batch` runs so).
func Load(o Options) (*Stack, error) {
	o.HTTP.Tracing = o.Tracing
	if err := o.gateFIM(); err != nil {
		return nil, err
	}
	srv, err := sfhttp.NewServer(o.HTTP)
	if err != nil {
		return nil, err
	}
	s := &Stack{Server: srv, tracing: o.Tracing}
	if err := s.load(o); err != nil {
		return nil, err
	}
	srv.SetModels(s.Models)
	return s, nil
}

// Addr is where the stack listens.
func (s *Stack) Addr() net.Addr { return s.addr }

// URL is the stack's base URL.
func (s *Stack) URL() string { return "http://" + s.addr.String() }

// ServeErr reports a listener failure.
func (s *Stack) ServeErr() <-chan error {
	ch := make(chan error, 1)
	go func() { <-s.serveDone; ch <- s.serveErr }()
	return ch
}

// Close drains running requests (bounded by the HTTP drain time), stops
// the scheduler and frees the engine.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Stack) close() error {
	// The batch worker stops first: its requests in flight are abandoned
	// (they run again after a restart) instead of holding the drain.
	if s.Batches != nil {
		if err := s.Batches.Close(); err != nil {
			slog.Warn("closing the batch store", "err", err)
		}
	}
	err := s.Server.Shutdown(context.Background())
	s.pressure.close() // before the models unload: nothing left to tell
	if s.serveDone != nil {
		// fasthttp closes only the listeners Serve has registered: on a
		// busy machine a stack closed right after a quick load can get
		// here before its Serve goroutine ran, which would then accept
		// forever.
		s.ln.Close()
		<-s.serveDone
	}
	s.closeSessions()
	if s.Models != nil {
		if e := s.Models.Close(); e != nil && err == nil { // parks every model's cache
			err = e
		}
	}
	// The requests and schedulers have ended: their spans are queued. A
	// collector that does not answer holds shutdown 5 s at most.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if e := s.tracing.Shutdown(ctx); e != nil {
		slog.Warn("tracing: spans left unexported at shutdown", "err", e)
	}
	return err
}

// gateFIM makes the server's FIM gate from o.FIM; the server shows its
// counters and every model loaded passes its FIM requests through it.
func (o *Options) gateFIM() error {
	if err := o.FIM.Validate(); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	o.HTTP.FIMGate = task.NewFIMGate(o.FIM, nil)
	return nil
}

func (o *Options) withDefaults() {
	if o.Lanes <= 0 {
		o.Lanes = 4
	}
	if o.Ctx <= 0 {
		o.Ctx = 16384
	}
	if o.HostCache == 0 {
		o.HostCache = 1 << 30
	}
	if o.Alias == "" {
		o.Alias = strings.TrimSuffix(filepath.Base(o.ModelPath), filepath.Ext(o.ModelPath))
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 5 * time.Minute
	}
	if o.MemoryBudget == 0 {
		o.MemoryBudget = defaultMemoryBudget()
	}
	o.Sched.Lanes = o.Lanes
}

// load loads the resident models; the default one's parts become the
// stack's.
func (s *Stack) load(o Options) error {
	o.withDefaults()
	reg, err := newRegistry(o)
	if err != nil {
		return err
	}
	if err := reg.loadResident(); err != nil {
		reg.Close()
		return err
	}
	st := reg.defaultStack()
	s.Models, s.Engine, s.Cache, s.Sched, s.Model = reg, st.Engine, st.Cache, st.Sched, st.Model
	return nil
}

// LoadChatTemplate parses the chat template prompts are rendered with:
// the file templateFile names when it is set, else the model's own (ChatML
// when it has none). A template named on the command line that does not
// parse is an error naming the file: the operator asked for it. A template
// that cannot be used is refused instead, the model then served without
// one: the model's own failing to parse, or any template crossing a
// sandbox bound (chat.ErrBound: its text, or the trial renders Parse makes)
// — a template is model metadata anyone can publish, and a pulled model
// must not take the server down. refused says why, a warning is logged, and
// chat endpoints answer 400 with the reason, since the completion endpoints
// still work. An override replaces desc.ChatTemplate, so what /props shows
// and the reasoning-block check see the template in use. `superfluid run
// --chat` renders through it too, so the CLI and the server prompt alike.
func LoadChatTemplate(path, templateFile string, desc *engine.Descriptor, eng *cgo.Engine) (tmpl *chat.Template, refused, err error) {
	src, opts := chat.ChatML, chat.Options{}
	if f, err := gguf.Open(path); err == nil {
		if s, o, ok := chat.FromGGUF(f); ok {
			src, opts = s, o
		} else {
			opts = o
		}
	}
	if templateFile != "" {
		b, err := os.ReadFile(templateFile)
		if err != nil {
			return nil, nil, fmt.Errorf("chat template file: %w", err)
		}
		src = string(b)
	}
	opts.TokenizerAddsBOS = desc.AddBOS
	if opts.BOS == "" && desc.BOS >= 0 {
		opts.BOS = string(eng.AppendPiece(nil, desc.BOS, true))
	}
	t, err := chat.Parse(src, opts)
	switch {
	case err != nil && templateFile != "" && !errors.Is(err, chat.ErrBound):
		return nil, nil, fmt.Errorf("chat template file %s: %w", templateFile, err)
	case err != nil:
		source := "the model's chat template"
		if templateFile != "" {
			source = "chat template file " + templateFile
		}
		refused = fmt.Errorf("%s was refused at load: %w", source, err)
		slog.Warn("serving the model without a chat template; chat endpoints will refuse requests", "model", path, "reason", refused)
		return nil, refused, nil
	}
	if templateFile != "" {
		desc.ChatTemplate = src
	}
	return t, nil, nil
}

func loadFIM(desc *engine.Descriptor, eng *cgo.Engine) *fim.Builder {
	b, err := fim.NewBuilder(fim.Config{
		FIM: desc.FIM, NumTokens: desc.Vocab, BOS: desc.BOS, AddBOS: desc.AddBOS,
		TokenText: func(t engine.Token) string { return string(eng.AppendPiece(nil, t, true)) },
	})
	if err != nil && !errors.Is(err, fim.ErrNoFIM) {
		slog.Warn("fill-in-the-middle unavailable", "err", err)
	}
	return b
}

// cacheMetrics exposes the prefix cache's counters on /metrics.
type cacheMetrics struct{ c *kv.Cache }

// AddMetrics adds the cache's and its disk tier's samples to a scrape.
func (m cacheMetrics) AddMetrics(p *metric.Page) { m.c.AddMetrics(p) }
