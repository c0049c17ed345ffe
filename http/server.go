package http

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/sched"
)

// Config is the server's configuration. Validate it with NewServer.
type Config struct {
	// APIKey, when set, is required on every route but /health, as
	// "Authorization: Bearer KEY" or "x-api-key: KEY".
	APIKey string
	// MaxBody bounds a request body in bytes (default 16 MiB).
	MaxBody int
	// DefaultClass is the class of chat and completion requests that do not
	// name one (X-Superfluid-Class); FIM requests are always sched.FIM.
	DefaultClass sched.Class
	// Drain bounds how long shutdown waits for running requests (default 30s).
	Drain time.Duration
	// ClientPoll is how often a non-streaming request checks that its
	// client is still connected (default 250ms).
	ClientPoll time.Duration
	// CompletionCache is how many identical greedy FIM answers are kept
	// (default 64; negative disables it).
	CompletionCache int
	// Version is what /api/version and /props report.
	Version string
}

func (c *Config) validate() error {
	if c.MaxBody < 0 || c.Drain < 0 || c.ClientPoll < 0 {
		return errors.New("http: negative limit in configuration")
	}
	if c.MaxBody == 0 {
		c.MaxBody = 16 << 20
	}
	if c.Drain == 0 {
		c.Drain = 30 * time.Second
	}
	if c.ClientPoll == 0 {
		c.ClientPoll = 250 * time.Millisecond
	}
	if c.CompletionCache == 0 {
		c.CompletionCache = 64
	}
	if int(c.DefaultClass) >= sched.NumClasses {
		return fmt.Errorf("http: unknown default class %d", c.DefaultClass)
	}
	return nil
}

// Server serves every API over one model. Requests that arrive while the
// model loads get 503 (llama.cpp's /health contract); SetModel makes it
// ready.
type Server struct {
	cfg      Config
	model    atomic.Pointer[Model]
	gate     requestGate
	srv      *fasthttp.Server
	started  time.Time
	fimCache *completionCache
	routes   map[string]route
}

type route struct {
	method  string
	kind    apiKind
	handler func(*Server, *fasthttp.RequestCtx, *Model) error
	public  bool // no API key needed
	loading bool // answers while the model loads
}

// NewServer returns a server with no model yet.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, started: time.Now(), fimCache: newCompletionCache(cfg.CompletionCache)}
	s.routes = s.routeTable()
	s.srv = &fasthttp.Server{
		Handler:                            s.serve,
		Name:                               "superfluid",
		MaxRequestBodySize:                 cfg.MaxBody,
		ReadTimeout:                        5 * time.Minute,
		IdleTimeout:                        2 * time.Minute,
		NoDefaultServerHeader:              false,
		DisablePreParseMultipartForm:       true,
		StreamRequestBody:                  false,
		CloseOnShutdown:                    true,
		ErrorHandler:                       s.transportError,
		Logger:                             fasthttpLogger{},
		SleepWhenConcurrencyLimitsExceeded: 0,
	}
	return s, nil
}

// SetModel makes the server ready with m.
func (s *Server) SetModel(m *Model) { s.model.Store(m) }

// Serve answers on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown refuses new requests, waits for running ones (at most the
// configured drain time, or ctx), then closes the listeners.
func (s *Server) Shutdown(ctx context.Context) error {
	done := s.gate.drain()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Drain)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		slog.Warn("shutdown: requests still running after the drain period")
	}
	return s.srv.ShutdownWithContext(ctx)
}

func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	defer s.recoverPanic(ctx, path)
	r, ok := s.lookup(path)
	kind := kindOfPath(path)
	if !ok {
		writeError(ctx, kind, &apiError{Status: fasthttp.StatusNotFound, Type: "not_found_error", Msg: fmt.Sprintf("no route %s %s", ctx.Method(), path)})
		return
	}
	if r.method != "" && string(ctx.Method()) != r.method && !(r.method == "GET" && ctx.IsHead()) {
		writeError(ctx, r.kind, &apiError{Status: fasthttp.StatusMethodNotAllowed, Type: "invalid_request_error", Msg: fmt.Sprintf("%s wants %s, not %s", path, r.method, ctx.Method())})
		return
	}
	if !r.public && !s.authorized(ctx) {
		writeError(ctx, r.kind, &apiError{Status: fasthttp.StatusUnauthorized, Type: "authentication_error", Msg: "invalid or missing API key"})
		return
	}
	m := s.model.Load()
	if m == nil && !r.loading {
		writeError(ctx, r.kind, unavailable("the model is loading"))
		return
	}
	if !s.gate.enter() {
		ctx.Response.Header.Set("Connection", "close")
		writeError(ctx, r.kind, unavailable("the server is shutting down"))
		return
	}
	defer s.gate.leave()
	// A streamed response outlives its handler; streamResponse holds the
	// drain open until the stream ends (see inflightKey).
	ctx.SetUserValue(inflightKey{}, &s.gate)
	if err := r.handler(s, ctx, m); err != nil {
		writeError(ctx, r.kind, err)
	}
}

// recoverPanic turns a handler's panic into a 500 in the API's shape: one
// request fails, the server keeps serving everyone else.
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx, path string) {
	if v := recover(); v != nil {
		slog.Error("handler panic", "path", path, "panic", v, "stack", string(debug.Stack()))
		writeError(ctx, kindOfPath(path), serverError("internal error while handling %s", path))
	}
}

// RouteInfo describes one route the server answers, so that tests (bad
// input, auth) can cover every route instead of a list that goes stale.
type RouteInfo struct {
	Path   string
	Method string // "GET" also answers HEAD
	API    string // whose error shape it answers in: openai, llamacpp, ollama or anthropic
	Public bool   // answers without an API key
}

// Routes lists every route, sorted by path.
func (s *Server) Routes() []RouteInfo {
	out := make([]RouteInfo, 0, len(s.routes))
	for path, r := range s.routes {
		out = append(out, RouteInfo{Path: path, Method: r.method, API: r.kind.String(), Public: r.public})
	}
	slices.SortFunc(out, func(a, b RouteInfo) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// inflightKey is the RequestCtx user value under which serve leaves the
// server's WaitGroup of running requests, so that a streamed response —
// written by fasthttp after the handler has returned — counts as running
// until its last byte: Shutdown must wait for it, and newcomers meanwhile
// get 503 rather than a closed listener.
type inflightKey struct{}

func (s *Server) lookup(path string) (route, bool) {
	if r, ok := s.routes[path]; ok {
		return r, true
	}
	// OpenAI clients may be pointed at a base URL without /v1.
	if !strings.HasPrefix(path, "/v1/") {
		if r, ok := s.routes["/v1"+path]; ok && r.kind == apiOpenAI {
			return r, true
		}
	}
	return route{}, false
}

func kindOfPath(path string) apiKind {
	switch {
	case strings.HasPrefix(path, "/api/"):
		return apiOllama
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		return apiAnthropic
	case strings.HasPrefix(path, "/v1/"):
		return apiOpenAI
	}
	return apiLlama
}

func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key := string(ctx.Request.Header.Peek("x-api-key"))
	if auth := string(ctx.Request.Header.Peek("Authorization")); key == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		key = strings.TrimSpace(auth[7:])
	}
	return subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

// transportError answers requests fasthttp could not read (a body over the
// limit, a malformed request line) in the API's shape.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	kind := kindOfPath(string(ctx.Path()))
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeError(ctx, kind, &apiError{Status: fasthttp.StatusRequestEntityTooLarge, Type: "invalid_request_error", Msg: fmt.Sprintf("the request body is over the limit of %d bytes", s.cfg.MaxBody)})
		return
	}
	writeError(ctx, kind, badRequest("malformed HTTP request: %v", err))
}

type fasthttpLogger struct{}

func (fasthttpLogger) Printf(format string, args ...any) {
	slog.Debug(fmt.Sprintf(format, args...), "src", "fasthttp")
}
