// Package conversations is OpenAI's Conversations API over the server's
// session store: a conversation is an ordered list of items (messages,
// function calls and their outputs, reasoning) the server keeps, which
// POST /v1/responses continues when it names it (its `conversation`
// parameter, in package responses). Beyond OpenAI, a conversation can be
// forked at an item and trimmed (…/fork, …/trim), the session store's
// own operations. Items are read and shaped by package responses, so a
// conversation lists its items exactly as a response returns them.
package conversations

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/http/openai/responses"
	"superfluid/http/wire"
	"superfluid/session"
	"superfluid/task"
)

// api is the Conversations API's handlers over the store st holds.
type api struct {
	st *responses.Store
}

// Routes are the Conversations API's routes, its conversations kept in
// st's session store (the one the Responses API continues them in).
func Routes(_ wire.Host, st *responses.Store) []wire.Route {
	a := &api{st: st}
	route := func(method, path string, h wire.Handler, body wire.Body) wire.Route {
		// A conversation is the server's, whichever model wrote it.
		return wire.Route{Method: method, Path: path, API: wire.OpenAI, Handle: h, AnyModel: true, Body: body}
	}
	return []wire.Route{
		route("POST", "/v1/conversations", a.create, wire.BodyConversation),
		route("GET", "/v1/conversations/{id}", a.get, wire.BodyControl),
		route("POST", "/v1/conversations/{id}", a.update, wire.BodyControl),
		route("DELETE", "/v1/conversations/{id}", a.remove, wire.BodyControl),
		route("GET", "/v1/conversations/{id}/items", a.listItems, wire.BodyControl),
		route("POST", "/v1/conversations/{id}/items", a.addItems, wire.BodyConversation),
		route("GET", "/v1/conversations/{id}/items/{id}", a.getItem, wire.BodyControl),
		route("DELETE", "/v1/conversations/{id}/items/{id}", a.deleteItem, wire.BodyControl),
		route("POST", "/v1/conversations/{id}/fork", a.fork, wire.BodyControl),
		route("POST", "/v1/conversations/{id}/trim", a.trim, wire.BodyControl),
	}
}

func (a *api) create(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	fields, err := decodeFields(ctx.PostBody(), "items", "metadata")
	if err != nil {
		return err
	}
	meta, err := readMetadata(fields["metadata"])
	if err != nil {
		return err
	}
	items, err := newItems(fields["items"], false)
	if err != nil {
		return err
	}
	store, err := a.st.Sessions()
	if err != nil {
		return err
	}
	c, _, err := store.Create(meta, items)
	if err != nil {
		return responses.StoreError(err, "", "")
	}
	return wire.WriteJSON(ctx, convOf(c))
}

func (a *api) get(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, _, err := pathIDs(ctx, false)
	if err != nil {
		return err
	}
	store, err := a.st.Sessions()
	if err != nil {
		return err
	}
	c, err := store.Get(id)
	if err != nil {
		return responses.StoreError(err, id, "")
	}
	return wire.WriteJSON(ctx, convOf(c))
}

// update replaces the conversation's metadata (OpenAI: metadata is
// required, and replaces what was there).
func (a *api) update(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, _, err := pathIDs(ctx, false)
	if err != nil {
		return err
	}
	fields, err := decodeFields(ctx.PostBody(), "metadata")
	if err != nil {
		return err
	}
	if _, ok := fields["metadata"]; !ok {
		return wire.BadParam("metadata", "metadata is required")
	}
	meta, err := readMetadata(fields["metadata"])
	if err != nil {
		return err
	}
	store, err := a.st.Sessions()
	if err != nil {
		return err
	}
	c, err := store.SetMetadata(id, meta)
	if err != nil {
		return responses.StoreError(err, id, "")
	}
	return wire.WriteJSON(ctx, convOf(c))
}

func (a *api) remove(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, _, err := pathIDs(ctx, false)
	if err != nil {
		return err
	}
	store, release, err := a.claimed(id)
	if err != nil {
		return err
	}
	defer release()
	if err := store.Delete(id); err != nil {
		return responses.StoreError(err, id, "")
	}
	return wire.WriteJSON(ctx, convDeleted{ID: id, Object: "conversation.deleted", Deleted: true})
}

// newItems reads a body's items into the store's, shaped as OpenAI lists
// them.
func newItems(raw json.RawMessage, required bool) ([]session.Item, error) {
	list, err := readItemList(raw, required)
	if err != nil {
		return nil, err
	}
	shaped, err := responses.NewItems(list, "items")
	if err != nil {
		return nil, err
	}
	return responses.SessionItems(shaped), nil
}

// claimed is the session store with conversation id claimed for one
// change (responses.Store.Claim: one turn or change at a time); release
// ends the claim.
func (a *api) claimed(id string) (*session.Store, func(), error) {
	release, err := a.st.Claim(id)
	if err != nil {
		return nil, nil, err
	}
	store, err := a.st.Sessions()
	if err != nil {
		release()
		return nil, nil, err
	}
	return store, release, nil
}
