package ollama

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

// Ollama's model lifecycle over the models directory (wire.ModelStore):
// /api/pull streams a download's progress as Ollama does, /api/delete
// removes a model. Names are what package pull fetches — hf.co/ORG/REPO:QUANT
// or a URL — not Ollama's registry names.

type pullRequest struct {
	Model string `json:"model"`
	Name  string `json:"name"` // the field's name before "model"
	// Insecure is accepted and ignored, as Ollama v0.24.0 ignores it
	// ("Deprecated: ignored"); plain http URLs are fetched either way.
	Insecure bool `json:"insecure"`
	// Ollama ignores these too, but a client sending credentials believes
	// they are used: refused unless empty.
	Username json.RawMessage `json:"username"`
	Password json.RawMessage `json:"password"`
	Stream   *bool           `json:"stream"`
}

type deleteRequest struct {
	Model string `json:"model"`
	Name  string `json:"name"`
}

// progress is Ollama's api.ProgressResponse.
type progress struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

var pullSuccess = progress{Status: "success"}

// pull answers POST /api/pull. The pull runs on its own goroutine; the
// handler waits for its first report, so that a name the store refuses is
// a plain 4xx, then streams the reports as NDJSON lines (or, with stream
// false, answers the last one). The pull stops when the client leaves or
// the server shuts down; its partial file stays for the next pull to
// resume.
func (a *api) pull(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	var req pullRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	const noCredentials = "credentials are not sent anywhere; set HF_TOKEN in the server's environment for gated or private Hugging Face repositories"
	if err := wire.RefuseUnhonoured(
		wire.Unhonoured{Name: "username", Raw: req.Username, Neutral: wire.EmptyValue, Why: noCredentials},
		wire.Unhonoured{Name: "password", Raw: req.Password, Neutral: wire.EmptyValue, Why: noCredentials},
	); err != nil {
		return err
	}
	name := storeName(cmp.Or(req.Model, req.Name))
	if name == "" {
		return wire.BadParam("model", "model is required")
	}
	store, err := a.requireStore()
	if err != nil {
		return err
	}
	if req.Stream != nil && !*req.Stream {
		rctx, done := a.host.RequestContext(ctx)
		defer done()
		defer context.AfterFunc(a.host.Stopping(), done)()
		feed := startPull(rctx, store, name)
		for finished := false; !finished; {
			_, finished, err = feed.next()
		}
		if err != nil {
			return storeError(err, name)
		}
		return wire.WriteJSON(ctx, pullSuccess)
	}
	var (
		feed  *pullFeed
		first []progress
	)
	err = a.host.Stream(ctx, false, func(rctx context.Context) error {
		pctx, cancel := context.WithCancel(rctx)
		unhook := context.AfterFunc(a.host.Stopping(), cancel)
		feed = startPull(pctx, store, name)
		var done bool
		var err error
		first, done, err = feed.next()
		if done && len(first) == 0 {
			unhook()
			cancel()
			if err != nil {
				return storeError(err, name)
			}
			return errPulledAtOnce
		}
		feed.end = func() { unhook(); cancel() }
		return nil
	}, func(_ context.Context, _ context.CancelFunc, ew *wire.EventWriter) {
		defer feed.end()
		defer feed.drain() // the pull has ended before the response does
		batch, done, err := first, false, error(nil)
		for {
			for _, p := range batch {
				if ew.Send("", p) != nil {
					feed.end() // the client is gone
					return
				}
			}
			if done {
				break
			}
			batch, done, err = feed.next()
		}
		if err != nil {
			ew.Fail(storeError(err, name))
			return
		}
		ew.Send("", pullSuccess)
	})
	if errors.Is(err, errPulledAtOnce) {
		return wire.WriteJSON(ctx, pullSuccess)
	}
	return err
}

// errPulledAtOnce is a pull that ended well before its first report (the
// model was there already): its answer is one JSON object, not a stream.
var errPulledAtOnce = errors.New("ollama: the pull ended before its first report")

// delete answers DELETE /api/delete: 200 with no body, as Ollama.
func (a *api) delete(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	var req deleteRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	asked := cmp.Or(req.Model, req.Name)
	if asked == "" {
		return wire.BadParam("model", "model is required")
	}
	store, err := a.requireStore()
	if err != nil {
		return err
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	if err := store.Delete(rctx, storeName(asked)); err != nil {
		return storeError(err, asked)
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	return nil
}

func (a *api) requireStore() (wire.ModelStore, error) {
	if st := a.host.Store(); st != nil {
		return st, nil
	}
	return nil, &wire.Error{Status: fasthttp.StatusNotImplemented, Type: "invalid_request_error",
		Msg: "this server has no models directory to pull into or delete from"}
}

// storeName is the store's name for what an Ollama client sends:
// without the ":latest" tag /api/tags adds to every name (and that Ollama
// clients add to a name without one).
func storeName(name string) string {
	l := strings.ToLower(name)
	if strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
		return name
	}
	return strings.TrimSuffix(name, ":latest")
}

// storeError answers a store's failure: the name's fault is a 400, a
// missing model Ollama's 404, a serving model a 409, anything else a 500
// (as Ollama answers a failed pull).
func storeError(err error, name string) error {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return we
	case errors.Is(err, wire.ErrBadModelName):
		return wire.BadParam("model", "%v", err)
	case errors.Is(err, wire.ErrModelNotFound):
		return wire.NotFound("model '%s' not found", name)
	case errors.Is(err, wire.ErrModelInUse):
		return &wire.Error{Status: fasthttp.StatusConflict, Type: "invalid_request_error", Param: "model", Msg: err.Error()}
	}
	return wire.ServerError("%v", err)
}

// progressOf words a store's report as Ollama's progress line.
// Ollama names a layer by its digest's first 12 hex digits. A file whose
// digest is not yet known (a plain URL) is named by its file name, in the
// digest field too: clients key progress bars by the digest (Ollama's CLI
// takes one without "sha256:" as the bar's name) and Open WebUI shows a
// line without one as a notification, one per line.
func progressOf(p wire.PullProgress) progress {
	switch p.Phase {
	case wire.PullResolving:
		return progress{Status: "pulling manifest"}
	case wire.PullVerifying:
		return progress{Status: "verifying sha256 digest"}
	case wire.PullWriting:
		return progress{Status: "writing manifest"}
	}
	out := progress{Status: "pulling " + p.File, Digest: p.File, Total: p.Total, Completed: p.Completed}
	if len(p.SHA256) >= 12 {
		out.Status, out.Digest = "pulling "+p.SHA256[:12], "sha256:"+p.SHA256
	}
	return out
}

// pullFeed carries a pull's reports from its goroutine to the response
// without ever making the pull wait for a slow client: consecutive reports
// of one status (the byte counts of one file) collapse into the latest,
// so at most one line per phase is ever pending.
type pullFeed struct {
	mu      sync.Mutex
	pending []progress
	done    bool
	err     error
	wake    chan struct{} // one token: something changed
	end     func()        // stops the pull and lets go of the server's stop
}

// startPull runs store.Pull on its own goroutine, feeding a pullFeed. A
// panic in the store ends the pull with an error, not the process.
func startPull(ctx context.Context, store wire.ModelStore, name string) *pullFeed {
	f := &pullFeed{wake: make(chan struct{}, 1)}
	go func() {
		var err error
		defer func() {
			if v := recover(); v != nil {
				err = wire.FromTask(task.Recovered("pull", v))
			}
			f.finish(err)
		}()
		err = store.Pull(ctx, name, func(p wire.PullProgress) { f.report(progressOf(p)) })
	}()
	return f
}

func (f *pullFeed) report(p progress) {
	f.mu.Lock()
	if n := len(f.pending); n > 0 && f.pending[n-1].Status == p.Status {
		f.pending[n-1] = p
	} else {
		f.pending = append(f.pending, p)
	}
	f.mu.Unlock()
	f.signal()
}

func (f *pullFeed) finish(err error) {
	f.mu.Lock()
	f.done, f.err = true, err
	f.mu.Unlock()
	f.signal()
}

func (f *pullFeed) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// next waits until reports are pending or the pull has ended, and takes
// them; done and err are the pull's end, once it has come.
func (f *pullFeed) next() (batch []progress, done bool, err error) {
	for {
		f.mu.Lock()
		batch, f.pending = f.pending, nil
		done, err = f.done, f.err
		f.mu.Unlock()
		if len(batch) > 0 || done {
			return batch, done, err
		}
		<-f.wake
	}
}

// drain waits for the pull to end, dropping its reports.
func (f *pullFeed) drain() {
	for done := false; !done; {
		_, done, _ = f.next()
	}
}
