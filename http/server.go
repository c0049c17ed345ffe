package http

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/batches"
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
	// WriteTimeout is how long a response's writes may make no progress —
	// a client that stopped reading but keeps its socket open — before its
	// connection is closed; a stream is then cancelled and its lane freed
	// (default 30s). A stream renews it with every event, so it bounds a
	// stalled write, never a long generation.
	WriteTimeout time.Duration
	// CompletionCache is how many identical greedy FIM answers are kept
	// (default 64; negative disables it).
	CompletionCache int
	// Version is what /api/version and /props report.
	Version string
	// KeepBillingHeader keeps the billing header Claude Code puts at the
	// start of its system prompt (a per-request nonce, dropped by default
	// so that the prefix cache serves the next turn).
	KeepBillingHeader bool
}

func (c *Config) validate() error {
	if c.MaxBody < 0 || c.Drain < 0 || c.ClientPoll < 0 || c.WriteTimeout < 0 {
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
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.CompletionCache == 0 {
		c.CompletionCache = 64
	}
	if int(c.DefaultClass) >= sched.NumClasses {
		return fmt.Errorf("http: unknown default class %d", c.DefaultClass)
	}
	return nil
}

// Server serves every API over the models of a registry. Requests that
// arrive before it has one get 503 (llama.cpp's /health contract while
// the model loads); SetModels (or SetModel) makes it ready.
type Server struct {
	cfg      Config
	models   atomic.Pointer[modelsBox]
	gate     requestGate
	srv      *fasthttp.Server
	started  time.Time
	fimCache *completionCache
	// routes maps a path to its routes, one per method; a path segment
	// "{id}" matches any one segment (patterns lists those paths).
	routes    map[string][]route
	patterns  []string
	batches   atomic.Pointer[batches.Store]
	responses respStore                  // the Responses API's stored responses
	modelDir  atomic.Pointer[ModelStore] // the models directory (SetModelStore)
	// stopping ends when Shutdown begins: pulls stop then (a later pull
	// resumes them) instead of holding the drain open.
	stopping context.Context
	stop     context.CancelFunc
}

type route struct {
	method  string
	kind    apiKind
	handler func(*Server, *fasthttp.RequestCtx, *Model) error
	public  bool // no API key needed
	loading bool // answers while the model loads
	// anyModel routes name no model (listings, files, batches, stored
	// responses): their handler gets a nil *Model and nothing is loaded.
	anyModel bool
	// embeds: an embedding route, which a generation model refuses;
	// generates: a route that generates text, which an embedding model
	// refuses (generationPaths).
	embeds, generates bool
}

// NewServer returns a server with no model yet.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, started: time.Now(), fimCache: newCompletionCache(cfg.CompletionCache)}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.routes, s.patterns = s.routeTable()
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
		// fasthttp sets it once as a response starts: a whole response's
		// bound, and a fresh deadline for the next response on a
		// connection a stream renewed it on (see eventWriter).
		WriteTimeout: cfg.WriteTimeout,
	}
	return s, nil
}

// SetModel makes the server ready with m as its one model.
func (s *Server) SetModel(m *Model) { s.SetModels(singleModel{m: m, srv: s}) }

// SetModels makes the server ready with the models of ms.
func (s *Server) SetModels(ms Models) { s.models.Store(&modelsBox{ms}) }

// registry is the server's models; nil until SetModels.
func (s *Server) registry() Models {
	if b := s.models.Load(); b != nil {
		return b.Models
	}
	return nil
}

// Serve answers on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown refuses new requests, waits for running ones (at most the
// configured drain time, or ctx), then closes the listeners.
func (s *Server) Shutdown(ctx context.Context) error {
	done := s.gate.drain()
	s.stop()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Drain)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		slog.Warn("shutdown: requests still running after the drain period")
	}
	return s.srv.ShutdownWithContext(ctx)
}

func (s *Server) serve(ctx *fasthttp.RequestCtx) { s.route(ctx, true) }

// route answers one request; checkKey is false for requests Dispatch runs.
func (s *Server) route(ctx *fasthttp.RequestCtx, checkKey bool) {
	path := string(ctx.Path())
	defer s.recoverPanic(ctx, path)
	rs, id, ok := s.lookup(path)
	kind := kindOfPath(path)
	if !ok {
		writeError(ctx, kind, &apiError{Status: fasthttp.StatusNotFound, Type: "not_found_error", Msg: fmt.Sprintf("no route %s %s", ctx.Method(), path)})
		return
	}
	r, ok := pickMethod(rs, ctx)
	if !ok {
		writeError(ctx, r.kind, &apiError{Status: fasthttp.StatusMethodNotAllowed, Type: "invalid_request_error", Msg: fmt.Sprintf("%s wants %s, not %s", path, methodsOf(rs), ctx.Method())})
		return
	}
	if id != "" {
		ctx.SetUserValue(pathIDKey{}, id)
	}
	if checkKey && !r.public && !s.authorized(ctx) {
		writeError(ctx, r.kind, &apiError{Status: fasthttp.StatusUnauthorized, Type: "authentication_error", Msg: "invalid or missing API key"})
		return
	}
	ms := s.registry()
	if ms == nil && !r.loading {
		writeError(ctx, r.kind, unavailable("the model is loading"))
		return
	}
	if !s.gate.enter() {
		ctx.Response.Header.Set("Connection", "close")
		writeError(ctx, r.kind, unavailable("the server is shutting down"))
		return
	}
	defer s.gate.leave()
	var m *Model
	if ms != nil && !r.anyModel && !r.loading {
		// The one place a request's model is resolved, for every API: it
		// stays loaded until the handler and any stream it left are done.
		var hold *modelHold
		var err error
		if m, hold, err = s.acquireModel(ctx, ms, r.kind); err != nil {
			writeError(ctx, r.kind, err)
			return
		}
		defer hold.done()
		ctx.SetUserValue(modelHoldKey{}, hold)
	}
	if err := checkModelKind(m, r); err != nil {
		writeError(ctx, r.kind, err)
		return
	}
	// A streamed response outlives its handler; streamResponse holds the
	// drain open until the stream ends (see requestGate.hold) and gives its
	// writes the write timeout.
	ctx.SetUserValue(streamKey{}, s)
	if err := r.handler(s, ctx, m); err != nil {
		writeError(ctx, r.kind, err)
	}
}

// recoverPanic turns a handler's panic into a 500 in the API's shape: one
// request fails, the server keeps serving everyone else. follow's
// deferred Cancel has run by then, freeing the lane of the generation the
// handler followed. Streams and the goroutines of n choices recover on
// their own (streamResponse, fanOut).
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx, path string) {
	if v := recover(); v != nil {
		writeError(ctx, kindOfPath(path), recovered("handler of "+path, v))
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

// Routes lists every route, sorted by path then method. A path with an
// "{id}" segment stands for any id there (a request with an unknown one
// gets the route's 404).
func (s *Server) Routes() []RouteInfo {
	var out []RouteInfo
	for path, rs := range s.routes {
		for _, r := range rs {
			out = append(out, RouteInfo{Path: path, Method: r.method, API: r.kind.String(), Public: r.public})
		}
	}
	slices.SortFunc(out, func(a, b RouteInfo) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return out
}

// lookup finds the routes of path and the {id} it names, if any.
func (s *Server) lookup(path string) ([]route, string, bool) {
	if rs, id, ok := s.match(path); ok {
		return rs, id, true
	}
	// OpenAI clients may be pointed at a base URL without /v1.
	if !strings.HasPrefix(path, "/v1/") {
		if rs, id, ok := s.match("/v1" + path); ok && rs[0].kind == apiOpenAI {
			return rs, id, true
		}
	}
	return nil, "", false
}

func (s *Server) match(path string) ([]route, string, bool) {
	if rs, ok := s.routes[path]; ok {
		return rs, "", true
	}
	for _, p := range s.patterns {
		if id, ok := matchPattern(p, path); ok {
			return s.routes[p], id, true
		}
	}
	return nil, "", false
}

// matchPattern matches path against a pattern whose "{id}" segment takes
// any one non-empty segment, and returns that segment.
func matchPattern(pattern, path string) (string, bool) {
	id := ""
	for {
		pseg, prest, pmore := strings.Cut(strings.TrimPrefix(pattern, "/"), "/")
		seg, rest, more := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		switch {
		case pmore != more:
			return "", false
		case pseg == "{id}" && seg != "":
			id = seg
		case pseg != seg:
			return "", false
		}
		if !more {
			return id, true
		}
		pattern, path = "/"+prest, "/"+rest
	}
}

// pickMethod picks the route of the request's method (GET answers HEAD too).
func pickMethod(rs []route, ctx *fasthttp.RequestCtx) (route, bool) {
	method := string(ctx.Method())
	for _, r := range rs {
		if r.method == "" || r.method == method || r.method == "GET" && ctx.IsHead() {
			return r, true
		}
	}
	return rs[0], false
}

func methodsOf(rs []route) string {
	ms := make([]string, len(rs))
	for i, r := range rs {
		ms[i] = r.method
	}
	slices.Sort(ms)
	return strings.Join(ms, " or ")
}

// pathIDKey is the RequestCtx user value holding the {id} of the path.
type pathIDKey struct{}

// pathID is the {id} segment of the request's path.
func pathID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue(pathIDKey{}).(string)
	return id
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
