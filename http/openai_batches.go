package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"

	"superfluid/batches"
	"superfluid/http/wire"
)

// OpenAI's file and batch API over a batches.Store (SetBatches). Its
// requests run in-process through Dispatch, in the background class.

func openaiBatchRoutes() map[string][]route {
	r := func(method string, h func(*Server, *fasthttp.RequestCtx, *Model) error) route {
		return route{method: method, kind: wire.OpenAI, handler: h, anyModel: true}
	}
	return map[string][]route{
		"/v1/files":               {r("GET", (*Server).listFiles), r("POST", (*Server).uploadFile)},
		"/v1/files/{id}":          {r("GET", (*Server).getFile), r("DELETE", (*Server).deleteFile)},
		"/v1/files/{id}/content":  {r("GET", (*Server).fileContent)},
		"/v1/batches":             {r("GET", (*Server).listBatches), r("POST", (*Server).createBatch)},
		"/v1/batches/{id}":        {r("GET", (*Server).getBatch)},
		"/v1/batches/{id}/cancel": {r("POST", (*Server).cancelBatch)},
	}
}

// SetBatches gives the server the store behind /v1/files and /v1/batches;
// without one those routes answer that the batch API is off.
func (s *Server) SetBatches(st *batches.Store) { s.batches.Store(st) }

// store is the batch store, or the error that says there is none.
func (s *Server) store() (*batches.Store, error) {
	st := s.batches.Load()
	if st == nil {
		return nil, &wire.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "batch_api_off",
			Msg: "the batch API is off: this server has no data directory (start it with --data-dir)"}
	}
	return st, nil
}

// batchError maps the store's errors to OpenAI's: an unknown id is a 404,
// a refused request a 400 naming its field, a closing store a 503.
func batchError(err error) error {
	var ie *batches.InvalidError
	var qe *batches.QuotaError
	switch {
	case errors.As(err, &qe): // a 4xx: OpenAI's clients retry 5xx, and this cannot pass until files go
		return &wire.Error{Status: fasthttp.StatusRequestEntityTooLarge, Type: "invalid_request_error", Param: "file", Code: "storage_limit_exceeded", Msg: qe.Error()}
	case errors.Is(err, batches.ErrNotFound):
		return &wire.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Msg: err.Error()}
	case errors.As(err, &ie):
		return wire.BadParam(ie.Param, "%s", ie.Msg)
	case errors.Is(err, batches.ErrClosed):
		return wire.Unavailable("the server is shutting down")
	}
	return wire.ServerError("%v", err)
}

// answerFromStore runs op on the batch store and answers with what it
// returns as JSON, or with its error in OpenAI's shape.
func answerFromStore[T any](s *Server, ctx *fasthttp.RequestCtx, op func(*batches.Store) (T, error)) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	v, err := op(st)
	if err != nil {
		return batchError(err)
	}
	return wire.WriteJSON(ctx, v)
}

func (s *Server) createBatch(ctx *fasthttp.RequestCtx, _ *Model) error {
	var p batches.BatchParams
	if err := wire.DecodeJSON(ctx, &p); err != nil {
		return err
	}
	return answerFromStore(s, ctx, func(st *batches.Store) (batches.Batch, error) { return st.CreateBatch(p) })
}

func (s *Server) getBatch(ctx *fasthttp.RequestCtx, _ *Model) error {
	return answerFromStore(s, ctx, func(st *batches.Store) (batches.Batch, error) { return st.Batch(pathID(ctx)) })
}

// cancelBatch takes no body; one that is sent must be JSON (a client
// that sends garbage hears so rather than having it ignored).
func (s *Server) cancelBatch(ctx *fasthttp.RequestCtx, _ *Model) error {
	if body := bytes.TrimSpace(ctx.PostBody()); len(body) > 0 && !json.Valid(body) {
		return wire.BadRequest("malformed JSON: this route takes no body")
	}
	return answerFromStore(s, ctx, func(st *batches.Store) (batches.Batch, error) { return st.Cancel(pathID(ctx)) })
}

func (s *Server) listBatches(ctx *fasthttp.RequestCtx, _ *Model) error {
	p, err := listParams(ctx)
	if err != nil {
		return err
	}
	return answerFromStore(s, ctx, func(st *batches.Store) (batches.Page[batches.Batch], error) { return st.Batches(p) })
}

// listParams reads after, limit, order and purpose from the query.
func listParams(ctx *fasthttp.RequestCtx) (batches.ListParams, error) {
	args := ctx.QueryArgs()
	p := batches.ListParams{After: string(args.Peek("after")), Order: string(args.Peek("order")), Purpose: string(args.Peek("purpose"))}
	if v := args.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return p, wire.BadParam("limit", "limit must be an integer, not %q", v)
		}
		if n == 0 { // 0 would mean "the default" to the store
			return p, wire.BadParam("limit", "limit must be at least 1")
		}
		p.Limit = n
	}
	return p, nil
}
