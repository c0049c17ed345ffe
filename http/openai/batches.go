package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"

	"superfluid/batches"
	"superfluid/http/wire"
	"superfluid/task"
)

// OpenAI's file and batch API over a batches.Store (Stores.SetBatches).
// Its requests run through Answer, in the background class.

// batchStore is the batch store, or the error that says there is none.
func (a *api) batchStore() (*batches.Store, error) {
	st := a.stores.batches.Load()
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
func answerFromStore[T any](a *api, ctx *fasthttp.RequestCtx, op func(*batches.Store) (T, error)) error {
	st, err := a.batchStore()
	if err != nil {
		return err
	}
	v, err := op(st)
	if err != nil {
		return batchError(err)
	}
	return wire.WriteJSON(ctx, v)
}

func (a *api) createBatch(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	var p batches.BatchParams
	if err := wire.DecodeJSON(ctx, &p); err != nil {
		return err
	}
	return answerFromStore(a, ctx, func(st *batches.Store) (batches.Batch, error) { return st.CreateBatch(p) })
}

func (a *api) getBatch(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	return answerFromStore(a, ctx, func(st *batches.Store) (batches.Batch, error) { return st.Batch(wire.PathID(ctx)) })
}

// cancelBatch takes no body; one that is sent must be JSON (a client
// that sends garbage hears so rather than having it ignored).
func (a *api) cancelBatch(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	if body := bytes.TrimSpace(ctx.PostBody()); len(body) > 0 && !json.Valid(body) {
		return wire.BadRequest("malformed JSON: this route takes no body")
	}
	return answerFromStore(a, ctx, func(st *batches.Store) (batches.Batch, error) { return st.Cancel(wire.PathID(ctx)) })
}

func (a *api) listBatches(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	p, err := listParams(ctx)
	if err != nil {
		return err
	}
	return answerFromStore(a, ctx, func(st *batches.Store) (batches.Page[batches.Batch], error) { return st.Batches(p) })
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
