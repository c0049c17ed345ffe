package conversations

import (
	"github.com/valyala/fasthttp"

	"superfluid/http/openai/responses"
	"superfluid/http/wire"
	"superfluid/task"
)

// Beyond OpenAI, the session store's own operations on a conversation:
//
//	POST /v1/conversations/{id}/fork {"item_id": …, "metadata": {…}}
//	  a new conversation holding the items up to and including item_id
//	  (all of them without one); the items are shared, not copied, and so
//	  is the prefix cache's copy of their prompt.
//	POST /v1/conversations/{id}/trim {"drop_first": n} | {"after": item_id}
//	  drops the first n items, or every item after item_id.
//
// Both answer a conversation object: the new one, the trimmed one.

func (a *api) fork(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, _, err := pathIDs(ctx, false)
	if err != nil {
		return err
	}
	fields, err := decodeFields(ctx.PostBody(), "item_id", "metadata")
	if err != nil {
		return err
	}
	at, _, err := readString(fields, "item_id")
	if err != nil {
		return err
	}
	if at != "" {
		if err := responses.CheckID(at, "item_id", ""); err != nil {
			return err
		}
	}
	meta, err := readMetadata(fields["metadata"])
	if err != nil {
		return err
	}
	store, err := a.st.Sessions()
	if err != nil {
		return err
	}
	if _, err := store.Get(id); err != nil {
		return responses.StoreError(err, id, "")
	}
	c, err := store.Fork(id, at, meta)
	if err != nil {
		return responses.StoreError(err, id, at)
	}
	return wire.WriteJSON(ctx, convOf(c))
}

func (a *api) trim(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, _, err := pathIDs(ctx, false)
	if err != nil {
		return err
	}
	fields, err := decodeFields(ctx.PostBody(), "drop_first", "after")
	if err != nil {
		return err
	}
	rawDrop, hasDrop := fields["drop_first"]
	after, hasAfter, err := readString(fields, "after")
	if err != nil {
		return err
	}
	if hasDrop == hasAfter {
		return wire.BadRequest(`trim takes exactly one of "drop_first" (how many items to drop from the start) and "after" (the item after which every item is dropped)`)
	}
	drop := 0
	if hasDrop {
		if drop, err = readCount(rawDrop, "drop_first"); err != nil {
			return err
		}
	} else if err := responses.CheckID(after, "after", ""); err != nil {
		return err
	}
	store, release, err := a.claimed(id)
	if err != nil {
		return err
	}
	defer release()
	if _, err := store.Get(id); err != nil {
		return responses.StoreError(err, id, "")
	}
	if hasDrop {
		err = store.TrimFront(id, drop)
	} else {
		err = store.TrimAfter(id, after)
	}
	if err != nil {
		return responses.StoreError(err, id, after)
	}
	c, err := store.Get(id)
	if err != nil {
		return responses.StoreError(err, id, "")
	}
	return wire.WriteJSON(ctx, convOf(c))
}
