package http

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/openai"
	"superfluid/http/openai/responses"
	"superfluid/http/wire"
	"superfluid/keys"
	"superfluid/media"
	"superfluid/metric"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/tracing"
)

// Config is the server's configuration. Validate it with NewServer.
type Config struct {
	// APIKey, when set, is required on every route but /health, as
	// "Authorization: Bearer KEY" or "x-api-key: KEY".
	APIKey string
	// Keys, when set, are the keys file's keys with their policies: any of
	// them (or APIKey, which has no limits) is then required.
	Keys *keys.Keeper
	// MaxBody bounds a file upload's body in bytes (default 16 MiB), and
	// caps every other route's own limit (see bodyLimit).
	MaxBody int
	// AllowedOrigins are origins (scheme://host[:port], one "*" each at
	// most, or "*" for all) whose web pages may use the server, beside
	// the defaults (see originPolicy).
	AllowedOrigins []string
	// MaxConnsPerIP bounds the connections one client address holds open
	// (default 256; negative: no bound).
	MaxConnsPerIP int
	// HeaderTimeout bounds how long a new connection may take to send
	// its first request's headers, and any request its headers once the
	// first byte arrived (default 10s): a slowloris holds nothing longer.
	HeaderTimeout time.Duration
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
	// FIMGate is the server's gate for inline completions (the rate
	// bucket; app sets it on every model too), whose counters /metrics
	// shows; nil: none.
	FIMGate *task.FIMGate
	// Metrics add server-wide samples to every scrape of /metrics (the
	// memory-pressure monitor's).
	Metrics []func(*metric.Page)
	// CompletionCache is how many identical greedy FIM answers are kept
	// (default 64; negative disables it).
	CompletionCache int
	// Version is what /api/version and /props report.
	Version string
	// KeepBillingHeader keeps the billing header Claude Code puts at the
	// start of its system prompt (a per-request nonce, dropped by default
	// so that the prefix cache serves the next turn).
	KeepBillingHeader bool
	// RemoteMedia fetches the images requests name by http(s) URL
	// (serve --allow-remote-media); nil: such images are refused.
	RemoteMedia *media.Fetcher
	// Tracing exports a span of every request that reaches its route, the
	// parent of the scheduler's spans of its generation; nil: off.
	Tracing *tracing.Tracing
}

func (c *Config) validate() error {
	if c.MaxBody < 0 || c.Drain < 0 || c.ClientPoll < 0 || c.WriteTimeout < 0 || c.HeaderTimeout < 0 {
		return errors.New("http: negative limit in configuration")
	}
	if c.MaxBody == 0 {
		c.MaxBody = 16 << 20
	}
	if c.Drain == 0 {
		c.Drain = 30 * time.Second
	}
	if c.HeaderTimeout == 0 {
		c.HeaderTimeout = 10 * time.Second
	}
	switch {
	case c.MaxConnsPerIP == 0:
		c.MaxConnsPerIP = defaultMaxConnsPerIP
	case c.MaxConnsPerIP < 0:
		c.MaxConnsPerIP = 0 // no bound
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
	cfg     Config
	models  atomic.Pointer[modelsBox]
	gate    requestGate
	srv     *fasthttp.Server
	started time.Time
	// origins is the Origin rule before Serve knows the server's own
	// address; guard, set by Serve, adds it and the Host rule.
	origins  *originPolicy
	guard    atomic.Pointer[transportGuard]
	hostname string
	fimCache *task.CompletionCache
	// routes maps a path to its routes, one per method; a path segment
	// "{id}" matches any one segment (patterns lists those paths).
	routes    map[string][]route
	patterns  []string
	openai    openai.Stores              // the batch API's store
	responses responses.Store            // the Responses API's stored responses
	modelDir  atomic.Pointer[ModelStore] // the models directory (SetModelStore)
	// stopping ends when Shutdown begins: pulls stop then (a later pull
	// resumes them) instead of holding the drain open.
	stopping context.Context
	stop     context.CancelFunc
	// rates keeps, per model name, what the previous scrape read for
	// llama-server's since-the-last-scrape throughput gauges.
	rates sync.Map // string → *sched.ScrapeRates
}

type route struct {
	method  string
	path    string // the pattern it is mounted on ("/v1/batches/{id}"): a trace's route
	kind    wire.API
	handler func(*Server, *fasthttp.RequestCtx, *Model) error
	public  bool     // no API key needed
	body    bodyKind // how large a body it takes (bodyLimit)
	loading bool     // answers while the model loads
	// anyModel routes name no model (listings, files, batches, stored
	// responses): their handler gets a nil *Model and nothing is loaded.
	anyModel bool
	// beyondPolicy: its work escapes a key's policy (beyondPolicyRoutes).
	beyondPolicy bool
	// embeds: an embedding route, which a generation model refuses;
	// generates: a route that generates text, which an embedding model
	// refuses (generationPaths).
	embeds, generates bool
	// modelOf reads the model a request names when its body is not JSON
	// (wire.Route.ModelOf); nil: the JSON body's "model".
	modelOf func(*fasthttp.RequestCtx) string
}

// NewServer returns a server with no model yet.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	origins, err := newOriginPolicy(nil, cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, started: time.Now(), fimCache: task.NewCompletionCache(cfg.CompletionCache), origins: origins}
	if s.hostname, err = os.Hostname(); err != nil {
		slog.Warn("the machine's host name is unknown: requests must name localhost or a loopback address", "err", err)
	}
	s.stopping, s.stop = context.WithCancel(context.Background())
	if s.routes, s.patterns, err = s.routeTable(); err != nil {
		return nil, err
	}
	s.srv = &fasthttp.Server{
		Handler:            s.serve,
		Name:               "superfluid",
		MaxRequestBodySize: cfg.MaxBody,
		// ReadTimeout bounds a connection's wait for its first request
		// and each request's headers (a slowloris holds a connection that
		// long at most); HeaderReceived then gives the body its own.
		ReadTimeout:                  cfg.HeaderTimeout,
		HeaderReceived:               s.headerReceived,
		IdleTimeout:                  2 * time.Minute,
		NoDefaultServerHeader:        false,
		DisablePreParseMultipartForm: true,
		// The handler reads bodies (readBody): fasthttp would allocate a
		// body's announced length before reading it.
		StreamRequestBody:                  true,
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

// defaultMaxConnsPerIP: a browser holds 6 connections to a host, an
// agent harness or `superfluid bench` a few dozen; every local client
// shares 127.0.0.1, so the bound is generous.
const defaultMaxConnsPerIP = 256

// Serve answers on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.guard.Store(s.guardFor(ln.Addr()))
	if s.cfg.MaxConnsPerIP > 0 {
		ln = newPerIPListener(ln, s.cfg.MaxConnsPerIP)
	}
	return s.srv.Serve(ln)
}

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

// serve answers a request that came over a socket: what its headers
// decide (admit) is answered before its body is read.
func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	defer s.recoverPanic(ctx, path)
	a := s.admit(&ctx.Request.Header, path)
	if a.origin != "" {
		defer allowOrigin(ctx, a.origin)
	}
	switch {
	case a.refuse != nil:
		if a.refuse.Status == fasthttp.StatusUnauthorized && s.cfg.Keys != nil {
			s.cfg.Keys.Unauthorized()
		}
		wire.WriteError(ctx, a.kind, a.refuse)
		ctx.SetConnectionClose() // its body, if any, stays unread
		return
	case a.preflight:
		answerPreflight(ctx, a.origin)
		return
	}
	if err := readBody(ctx, a.limit); err != nil {
		wire.WriteError(ctx, a.kind, err)
		ctx.SetConnectionClose()
		return
	}
	s.run(ctx, a.route, a.id, a.client)
}

// resolve finds the route of a request and its path's {id}: 404 for no
// route (in the shape its path implies), 405 for the wrong method.
func (s *Server) resolve(path, method string, isHead bool) (route, string, *wire.Error) {
	rs, id, ok := s.lookup(path)
	if !ok {
		return route{kind: kindOfPath(path)}, "", &wire.Error{Status: fasthttp.StatusNotFound, Type: "not_found_error", Msg: fmt.Sprintf("no route %s %s", method, path)}
	}
	r, ok := pickMethod(rs, method, isHead)
	if !ok {
		return r, "", &wire.Error{Status: fasthttp.StatusMethodNotAllowed, Type: "invalid_request_error", Msg: fmt.Sprintf("%s wants %s, not %s", path, methodsOf(rs), method)}
	}
	return r, id, nil
}

// run answers an admitted request on route r; client is the key it
// presented when the keys file names it (nil otherwise), whose policy
// holds here for every API: its requests per minute, the model it names,
// and — through the model it hands the handler (keyedModel) — the class,
// lanes and tokens of each generation.
func (s *Server) run(ctx *fasthttp.RequestCtx, r route, id string, client *keys.Client) {
	if id != "" {
		wire.SetPathID(ctx, id)
	}
	ctx.SetUserValue(routeAPIKey{}, r.kind)
	if tr := s.startTrace(ctx, r); tr != nil {
		defer func() {
			tr.SetStatus(ctx.Response.StatusCode())
			tr.Done()
		}()
	}
	ms := s.registry()
	if ms == nil && !r.loading {
		wire.WriteError(ctx, r.kind, wire.Unavailable("the model is loading"))
		return
	}
	if !s.gate.enter() {
		ctx.Response.Header.Set("Connection", "close")
		wire.WriteError(ctx, r.kind, wire.Unavailable("the server is shutting down"))
		return
	}
	defer s.gate.leave()
	var kreq *keys.Request // the key's hold on the lanes this request starts
	if client != nil {
		// After the answer is written (an error resets the headers), before
		// fasthttp sends them, streams included.
		defer setRateHeaders(ctx, r.kind, client)
		var err error
		if kreq, err = startKeyed(ctx, r, client); err != nil {
			wire.WriteError(ctx, r.kind, err)
			return
		}
		// Ends here unless the model hold takes it over (below).
		defer func() {
			if kreq != nil {
				kreq.End()
			}
		}()
	}
	var m *Model
	if ms != nil && !r.anyModel && !r.loading {
		// The one place a request's model is resolved, for every API: it
		// stays loaded until the handler and any stream it left are done.
		var hold *modelHold
		var err error
		if m, hold, err = s.acquireModel(ctx, ms, r, client); err != nil {
			wire.WriteError(ctx, r.kind, err)
			return
		}
		if kreq != nil {
			// The lanes are the key's until the answer ends, a stream's
			// included (the hold outlives the handler as long).
			hold.then(kreq.End)
			kreq = nil
		}
		defer hold.done()
		ctx.SetUserValue(modelHoldKey{}, hold)
		traceOf(ctx).SetModel(m.Name)
	}
	arrived := announce(m, r)
	defer arrived()
	ctx.SetUserValue(arrivalKey{}, arrived)
	if err := checkModelKind(m, r); err != nil {
		wire.WriteError(ctx, r.kind, err)
		return
	}
	// A streamed response outlives its handler; streamResponse holds the
	// drain open until the stream ends (see requestGate.hold) and gives its
	// writes the write timeout.
	ctx.SetUserValue(streamKey{}, s)
	if err := r.handler(s, ctx, m); err != nil {
		wire.WriteError(ctx, r.kind, err)
	}
}

// recoverPanic turns a handler's panic into a 500 in the API's shape: one
// request fails, the server keeps serving everyone else. follow's
// deferred Cancel has run by then, freeing the lane of the generation the
// handler followed. Streams and the goroutines of n choices recover on
// their own (streamResponse, fanOut).
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx, path string) {
	if v := recover(); v != nil {
		wire.WriteError(ctx, kindOfPath(path), task.Recovered("handler of "+path, v))
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
		if rs, id, ok := s.match("/v1" + path); ok && rs[0].kind == wire.OpenAI {
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

// matchPattern matches path against a pattern whose "{id}" segments each
// take any one non-empty segment, and returns them joined by "/" (which
// no segment holds; wire.PathIDs splits them).
func matchPattern(pattern, path string) (string, bool) {
	id := ""
	for {
		pseg, prest, pmore := strings.Cut(strings.TrimPrefix(pattern, "/"), "/")
		seg, rest, more := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		switch {
		case pmore != more:
			return "", false
		case pseg == "{id}" && seg != "" && id == "":
			id = seg
		case pseg == "{id}" && seg != "":
			id += "/" + seg
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
func pickMethod(rs []route, method string, isHead bool) (route, bool) {
	for _, r := range rs {
		if r.method == "" || r.method == method || r.method == "GET" && isHead {
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

func kindOfPath(path string) wire.API {
	switch {
	case strings.HasPrefix(path, "/api/"):
		return wire.Ollama
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		return wire.Anthropic
	case strings.HasPrefix(path, "/v1/"):
		return wire.OpenAI
	}
	return wire.Llama
}

// transportError answers requests fasthttp could not read (a malformed
// request line, headers or body not sent in time) in the API's shape.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	kind := kindOfPath(string(ctx.Path()))
	var ne interface{ Timeout() bool }
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		wire.WriteError(ctx, kind, tooLarge(s.cfg.MaxBody))
	case errors.As(err, &ne) && ne.Timeout():
		wire.WriteError(ctx, kind, timedOut("the request"))
	default:
		wire.WriteError(ctx, kind, wire.BadRequest("malformed HTTP request: %v", err))
	}
}

type fasthttpLogger struct{}

func (fasthttpLogger) Printf(format string, args ...any) {
	slog.Debug(fmt.Sprintf(format, args...), "src", "fasthttp")
}
