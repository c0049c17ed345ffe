package conversations

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"superfluid/http/openai/responses"
	"superfluid/http/wire"
	"superfluid/task"
)

// The items of a conversation: list, add, fetch and delete one.

// pathIDs are the conversation id (and the item id, when withItem) of the
// request's path, refused as OpenAI refuses a malformed id before any look-up.
func pathIDs(ctx *fasthttp.RequestCtx, withItem bool) (convID, itemID string, err error) {
	ids := wire.PathIDs(ctx)
	if len(ids) == 0 {
		return "", "", wire.BadParam("conversation_id", "the conversation id is missing from the path")
	}
	convID = ids[0]
	if err := responses.CheckID(convID, "conversation_id", "conv_"); err != nil {
		return "", "", err
	}
	if !withItem {
		return convID, "", nil
	}
	if len(ids) < 2 {
		return "", "", wire.BadParam("item_id", "the item id is missing from the path")
	}
	itemID = ids[1]
	return convID, itemID, responses.CheckID(itemID, "item_id", "")
}

// listQuery is GET …/items' query: after, limit (1–100, 20), order (asc
// or desc, desc by default), include.
type listQuery struct {
	after string
	limit int
	desc  bool
}

func readListQuery(ctx *fasthttp.RequestCtx) (listQuery, error) {
	q := listQuery{limit: defaultListLimit, desc: true}
	args := ctx.QueryArgs()
	if v := args.Peek("after"); len(v) > 0 {
		q.after = string(v)
		if err := responses.CheckID(q.after, "after", ""); err != nil {
			return q, err
		}
	}
	if v := args.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > maxListLimit {
			return q, wire.BadParam("limit", "limit must be an integer from 1 to %d, not %.40q", maxListLimit, v)
		}
		q.limit = n
	}
	switch v := string(args.Peek("order")); v {
	case "", "desc":
	case "asc":
		q.desc = false
	default:
		return q, wire.BadParam("order", "order must be \"asc\" or \"desc\", not %.40q", v)
	}
	return q, checkInclude(ctx)
}

// checkInclude reads the query's include values (include=… or, as the
// official clients write it, include[]=…): it accepts what the items
// already hold or what this server has none of (the outputs of hosted
// tools, image URLs, encrypted reasoning: reasoning is kept as plain
// text), and refuses logprobs, which it does not keep.
func checkInclude(ctx *fasthttp.RequestCtx) error {
	args := ctx.QueryArgs()
	for _, v := range append(args.PeekMulti("include"), args.PeekMulti("include[]")...) {
		switch s := string(v); s {
		case "web_search_call.action.sources", "code_interpreter_call.outputs", "computer_call_output.output.image_url",
			"file_search_call.results", "message.input_image.image_url", "reasoning.encrypted_content", "web_search_call.results":
		case "message.output_text.logprobs":
			return wire.NotSupported("include", "message.output_text.logprobs: a conversation keeps no logprobs")
		default:
			return wire.BadParam("include", "include: %.60q is not a known includable", s)
		}
	}
	return nil
}

func (a *api) listItems(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, _, err := pathIDs(ctx, false)
	if err != nil {
		return err
	}
	q, err := readListQuery(ctx)
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
	items, more, err := store.Items(id, q.after, q.limit, q.desc)
	if err != nil {
		return responses.StoreError(err, id, q.after)
	}
	return wire.WriteJSON(ctx, listOf(items, more))
}

func (a *api) addItems(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, _, err := pathIDs(ctx, false)
	if err != nil {
		return err
	}
	if err := checkInclude(ctx); err != nil {
		return err
	}
	fields, err := decodeFields(ctx.PostBody(), "items")
	if err != nil {
		return err
	}
	items, err := newItems(fields["items"], true)
	if err != nil {
		return err
	}
	store, release, err := a.claimed(id)
	if err != nil {
		return err
	}
	defer release()
	added, err := store.Append(id, items)
	if err != nil {
		return responses.StoreError(err, id, "")
	}
	return wire.WriteJSON(ctx, listOf(added, false))
}

func (a *api) getItem(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, itemID, err := pathIDs(ctx, true)
	if err != nil {
		return err
	}
	if err := checkInclude(ctx); err != nil {
		return err
	}
	store, err := a.st.Sessions()
	if err != nil {
		return err
	}
	if _, err := store.Get(id); err != nil {
		return responses.StoreError(err, id, "")
	}
	it, err := store.Item(id, itemID)
	if err != nil {
		return responses.StoreError(err, id, itemID)
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(it.Data)
	return nil
}

// deleteItem answers the conversation, as OpenAI does.
func (a *api) deleteItem(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	id, itemID, err := pathIDs(ctx, true)
	if err != nil {
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
	if err := store.DeleteItem(id, itemID); err != nil {
		return responses.StoreError(err, id, itemID)
	}
	c, err := store.Get(id)
	if err != nil {
		return responses.StoreError(err, id, "")
	}
	return wire.WriteJSON(ctx, convOf(c))
}
