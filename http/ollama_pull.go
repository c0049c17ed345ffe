package http

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

// Ollama's model lifecycle over the models directory (ModelStore):
// /api/pull streams a download's progress as Ollama does, /api/delete
// removes a model. Names are what package pull fetches — hf.co/ORG/REPO:QUANT
// or a URL — not Ollama's registry names.

type ollamaPullRequest struct {
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

type ollamaDeleteRequest struct {
	Model string `json:"model"`
	Name  string `json:"name"`
}

// ollamaProgress is Ollama's api.ProgressResponse.
type ollamaProgress struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

var ollamaPullSuccess = ollamaProgress{Status: "success"}

// ollamaPull answers POST /api/pull. The pull runs on its own goroutine;
// the handler waits for its first report, so that a name the store
// refuses is a plain 4xx, then streams the reports as NDJSON lines (or,
// with stream false, answers the last one). The pull stops when the
// client leaves or the server shuts down; its partial file stays for the
// next pull to resume.
func (s *Server) ollamaPull(ctx *fasthttp.RequestCtx, _ *Model) error {
	var req ollamaPullRequest
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
	name := ollamaStoreName(cmp.Or(req.Model, req.Name))
	if name == "" {
		return wire.BadParam("model", "model is required")
	}
	store, err := s.requireStore()
	if err != nil {
		return err
	}
	rctx, cancel := s.requestContext(ctx)
	unhook := context.AfterFunc(s.stopping, cancel)
	end := func() { unhook(); cancel() }
	feed := startPull(rctx, store, name)
	first, done, err := feed.next()
	if done && len(first) == 0 {
		end()
		if err != nil {
			return storeError(err, name)
		}
		return wire.WriteJSON(ctx, ollamaPullSuccess)
	}
	if req.Stream != nil && !*req.Stream {
		defer end()
		for !done {
			_, done, err = feed.next()
		}
		if err != nil {
			return storeError(err, name)
		}
		return wire.WriteJSON(ctx, ollamaPullSuccess)
	}
	streamResponse(ctx, false, func(ew *wire.EventWriter) {
		defer end()
		defer feed.drain() // the pull has ended before the response does
		batch := first
		for {
			for _, p := range batch {
				if ew.Send("", p) != nil {
					cancel() // the client is gone
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
		ew.Send("", ollamaPullSuccess)
	})
	return nil
}

// ollamaDelete answers DELETE /api/delete: 200 with no body, as Ollama.
func (s *Server) ollamaDelete(ctx *fasthttp.RequestCtx, _ *Model) error {
	var req ollamaDeleteRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	asked := cmp.Or(req.Model, req.Name)
	if asked == "" {
		return wire.BadParam("model", "model is required")
	}
	store, err := s.requireStore()
	if err != nil {
		return err
	}
	rctx, done := s.requestContext(ctx)
	defer done()
	if err := store.Delete(rctx, ollamaStoreName(asked)); err != nil {
		return storeError(err, asked)
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	return nil
}

func (s *Server) requireStore() (ModelStore, error) {
	if st := s.modelStore(); st != nil {
		return st, nil
	}
	return nil, &wire.Error{Status: fasthttp.StatusNotImplemented, Type: "invalid_request_error",
		Msg: "this server has no models directory to pull into or delete from"}
}

// ollamaStoreName is the store's name for what an Ollama client sends:
// without the ":latest" tag /api/tags adds to every name (and that Ollama
// clients add to a name without one).
func ollamaStoreName(name string) string {
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
	var api *wire.Error
	switch {
	case errors.As(err, &api):
		return api
	case errors.Is(err, ErrBadModelName):
		return wire.BadParam("model", "%v", err)
	case errors.Is(err, ErrModelNotFound):
		return wire.NotFound("model '%s' not found", name)
	case errors.Is(err, ErrModelInUse):
		return &wire.Error{Status: fasthttp.StatusConflict, Type: "invalid_request_error", Param: "model", Msg: err.Error()}
	}
	return wire.ServerError("%v", err)
}

// ollamaProgressOf words a store's report as Ollama's progress line.
// Ollama names a layer by its digest's first 12 hex digits. A file whose
// digest is not yet known (a plain URL) is named by its file name, in the
// digest field too: clients key progress bars by the digest (Ollama's CLI
// takes one without "sha256:" as the bar's name) and Open WebUI shows a
// line without one as a notification, one per line.
func ollamaProgressOf(p PullProgress) ollamaProgress {
	switch p.Phase {
	case PullResolving:
		return ollamaProgress{Status: "pulling manifest"}
	case PullVerifying:
		return ollamaProgress{Status: "verifying sha256 digest"}
	case PullWriting:
		return ollamaProgress{Status: "writing manifest"}
	}
	out := ollamaProgress{Status: "pulling " + p.File, Digest: p.File, Total: p.Total, Completed: p.Completed}
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
	pending []ollamaProgress
	done    bool
	err     error
	wake    chan struct{} // one token: something changed
}

// startPull runs store.Pull on its own goroutine, feeding a pullFeed. A
// panic in the store ends the pull with an error, not the process.
func startPull(ctx context.Context, store ModelStore, name string) *pullFeed {
	f := &pullFeed{wake: make(chan struct{}, 1)}
	go func() {
		var err error
		defer func() {
			if v := recover(); v != nil {
				err = wire.Recovered("pull", v)
			}
			f.finish(err)
		}()
		err = store.Pull(ctx, name, func(p PullProgress) { f.report(ollamaProgressOf(p)) })
	}()
	return f
}

func (f *pullFeed) report(p ollamaProgress) {
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
func (f *pullFeed) next() (batch []ollamaProgress, done bool, err error) {
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
