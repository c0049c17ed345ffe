package wire

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/media"
	"superfluid/sched"
	"superfluid/task"
)

// How an API package plugs into the transport: it exports
// Routes(h Host) []Route; package http mounts every route it returns and
// calls the handler once the request passed the transport's checks (auth,
// origin, body limit, the model named, loaded and of the right kind).

// Handler serves one request with the model it named (nil for a route
// with AnyModel). An error it returns is written in the route's API shape.
type Handler func(ctx *fasthttp.RequestCtx, m *task.Model) error

// Body is how large a body a route takes (the transport's limit classes).
type Body int

const (
	// BodyByRoute: the transport's rule for the method and path (a POST
	// carries a conversation unless it only names a model or an id).
	BodyByRoute Body = iota
	BodyControl
	BodyConversation
	BodyUpload
)

// Route is one method on one path. Path may hold "{id}" segments, each
// matching any one segment.
type Route struct {
	Method, Path string
	API          API // the shape its errors take
	Handle       Handler
	Public       bool // no API key needed
	Loading      bool // answers while the model loads
	Body         Body
	// AnyModel routes name no model (listings, files, stored responses):
	// the handler gets a nil model and nothing is loaded.
	AnyModel bool
	// Embeds: a generation model refuses it; Generates: an embedding
	// model refuses it.
	Embeds, Generates bool
	// ModelOf reads the model a request names when its body is not JSON
	// (a multipart upload's "model" field); nil: the JSON body's "model".
	// It runs before the handler, on the body read under the route's
	// limit; "" names the default model.
	ModelOf func(ctx *fasthttp.RequestCtx) string
}

// Host is what handlers need of the server that mounts them.
type Host interface {
	// RequestContext is the context a request's work runs under: it ends
	// when the client hangs up or done is called (always call it).
	RequestContext(ctx *fasthttp.RequestCtx) (rctx context.Context, done func())
	// Stream starts a streamed response (SSE when sse, else NDJSON) under
	// a context that watches the client. begin, when not nil, runs first
	// with that context and submits the work: when it fails nothing is
	// streamed and Stream returns its error, so a refusal still gets its
	// status code. produce then writes the events on fasthttp's writer
	// goroutine after the handler returned: it must not touch ctx. cancel
	// ends the context early (a failed choice ends the others); it ends
	// anyway when produce returns. A panic in produce ends the stream with
	// an error event.
	Stream(ctx *fasthttp.RequestCtx, sse bool, begin func(rctx context.Context) error,
		produce func(rctx context.Context, cancel context.CancelFunc, ew *EventWriter)) error
	// Class is the scheduling class a request asked for in its class
	// header (field names it in errors), else the server's default.
	Class(ctx *fasthttp.RequestCtx, field string) (sched.Class, error)
	// CompletionCache keeps identical greedy FIM answers (task.CacheKey).
	CompletionCache() *task.CompletionCache
	// FIMModel is the name of the model that answers fill-in-the-middle
	// requests, "" when it is the one the request named.
	FIMModel() string
	// FIMFor is the model that answers m's fill-in-the-middle requests
	// (the FIM model, held until release is called), else m.
	FIMFor(ctx context.Context, m *task.Model) (fm *task.Model, release func())
	// Available lists every model the request ctx can name, loaded or
	// not; Loaded the models loaded now (both empty while the server
	// loads). A key whose policy lists models sees only those.
	Available(ctx *fasthttp.RequestCtx) []ModelEntry
	Loaded(ctx *fasthttp.RequestCtx) []LoadedEntry
	// CacheStatus is the request's model's prefix cache as the status
	// endpoints report it (nil when there is none).
	CacheStatus(ctx *fasthttp.RequestCtx) any
	// Settings are the server's configuration values handlers read.
	Settings() Settings
	// Store is the models directory pulls go into, nil when the server
	// has none.
	Store() ModelStore
	// Stopping ends when the server begins to shut down: work that
	// outlives a request's generation (a pull) stops then.
	Stopping() context.Context
	// Pinner is the request's model's prefix cache when it can keep a
	// prefix resident (Anthropic's cache_control), else nil. Its pins are
	// recorded, when the server keeps conversations, and pinned again
	// after a restart (MemoryPinner: without the record).
	Pinner(ctx *fasthttp.RequestCtx) CachePinner
	// ProgressBody wraps a body streamed from a reader (a file's bytes)
	// so that the write timeout bounds a stalled download, not a long one.
	ProgressBody(ctx *fasthttp.RequestCtx, body io.ReadCloser) io.ReadCloser
}

// pathIDKey is the RequestCtx user value holding the {id} of the path.
type pathIDKey struct{}

// SetPathID records the {id} segment of the request's path (the
// transport's route lookup).
func SetPathID(ctx *fasthttp.RequestCtx, id string) { ctx.SetUserValue(pathIDKey{}, id) }

// PathID is the {id} segment of the request's path, "" for none (the
// segments joined by "/" when the path has several: see PathIDs).
func PathID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue(pathIDKey{}).(string)
	return id
}

// PathIDs are the {id} segments of the request's path, in order.
func PathIDs(ctx *fasthttp.RequestCtx) []string {
	if id := PathID(ctx); id != "" {
		return strings.Split(id, "/")
	}
	return nil
}

// CachePinner is a prefix cache that can keep a prompt prefix resident for
// a while: eviction and idle parking pass it over until ttl ends. Any
// goroutine may call Pin.
type CachePinner interface {
	Pin(prefix []engine.Token, ttl time.Duration)
}

// MemoryPinner is p without the record a restart would pin again (the
// server records the pins Host.Pinner gives): for a prefix its owner
// rebuilds anyway, as a conversation's prompt is rebuilt from its items.
func MemoryPinner(p CachePinner) CachePinner {
	if d, ok := p.(interface{ Memory() CachePinner }); ok {
		return d.Memory()
	}
	return p
}

// Settings are the server's configuration values an API reads.
type Settings struct {
	Version string    // what /api/version and /props report
	Started time.Time // when the server started
	// KeepBillingHeader keeps the billing header Claude Code puts at the
	// start of its system prompt (Anthropic).
	KeepBillingHeader bool
	// RemoteMedia fetches images named by URL; nil when the server does
	// not (FetchMedia refuses them then).
	RemoteMedia *media.Fetcher
}

// ModelEntry is one model a listing shows.
type ModelEntry struct {
	Name     string
	Path     string
	Size     int64 // the file's bytes
	Modified time.Time
	Digest   string      // gguf.ModelDigest of the file
	Loaded   *task.Model // nil when not loaded
}

// LoadedEntry is one model loaded now.
type LoadedEntry struct {
	Model *task.Model
	// Size is the memory it holds: the weights, the KV pool and the host
	// cache budget.
	Size      int64
	ExpiresAt time.Time // zero: never unloaded for idleness
	InFlight  int       // requests holding it
	Pinned    bool      // never unloaded by LRU
	// Cache is its prefix cache as the status endpoints report it (nil
	// when there is none).
	Cache any
	// PrefixCache is the prefix cache itself, for the live status's tiers
	// and counters (nil when there is none).
	PrefixCache any
}
