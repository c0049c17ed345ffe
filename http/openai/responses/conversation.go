package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/session"
	"superfluid/task"
)

// A response that names a conversation: its prompt is the conversation's
// items then the input, and the finished turn — the input items, then
// the output items — is appended to it. The items are rendered the same
// way every turn (respConversation), so turn N+1's prompt begins with
// turn N's: the prefix cache, and the park after a restart, hold it.

// conversationPinTTL is how long a conversation's last prompt stays
// pinned in the prefix cache after its turn: the time a client takes to
// read an answer and send the next turn (or run a tool).
const conversationPinTTL = 5 * time.Minute

// readConversation reads the conversation parameter: an id, or {"id": …}.
func readConversation(raw json.RawMessage) (string, error) {
	if task.IsNull(raw) {
		return "", nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		var ref struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &ref) != nil {
			return "", wire.BadParam("conversation", `conversation must be a conversation id or {"id": …}`)
		}
		id = ref.ID
	}
	return id, CheckID(id, "conversation", "conv_")
}

// claimConversation marks the conversation raw names busy with this
// turn (release frees it); with none named, release does nothing.
func (a *api) claimConversation(raw json.RawMessage) (release func(), err error) {
	id, err := readConversation(raw)
	if err != nil || id == "" {
		return func() {}, err
	}
	return a.store.Claim(id)
}

// conversationItems are the items of conversation id, in order.
func (a *api) conversationItems(id string) ([]json.RawMessage, error) {
	store, err := a.store.Sessions()
	if err != nil {
		e := wire.AsError(err)
		e.Param = "conversation"
		return nil, e
	}
	items, err := store.All(id)
	if err != nil {
		e := wire.AsError(StoreError(err, id, ""))
		e.Param = "conversation"
		return nil, e
	}
	out := make([]json.RawMessage, len(items))
	for i, it := range items {
		out[i] = it.Data
	}
	return out, nil
}

// appendTurn appends a finished turn to its conversation: the request's
// input items (read into conversation items when planned) and the
// response's output. A failed append fails the request: the client
// would continue a conversation that lacks the turn it was answered.
func (a *api) appendTurn(job *respJob) error {
	if job.conv == "" {
		return nil
	}
	out, err := outputItems(job.obj.Output)
	if err != nil {
		return wire.ServerError("the response's output: %v", err)
	}
	store, err := a.store.Sessions()
	if err != nil {
		return err
	}
	if _, err := store.Append(job.conv, SessionItems(append(job.convInput, out...))); err != nil {
		e := wire.AsError(StoreError(err, job.conv, ""))
		e.Msg = fmt.Sprintf("the turn was answered but not appended to conversation %s: %s", job.conv, e.Msg)
		return e
	}
	if job.pin != nil {
		job.pin.Pin(job.g.Media.Keyed(job.g.Prompt), conversationPinTTL)
	}
	return nil
}

// previousInConversation refuses a previous_response_id that names a
// response answered in a conversation: its stored record holds only its
// own turn, and the conversation is how it is continued.
func previousInConversation(id string, response []byte) error {
	var ref struct {
		Conversation *respConvRef `json:"conversation"`
	}
	if json.Unmarshal(response, &ref) == nil && ref.Conversation != nil {
		return wire.BadParam("previous_response_id", "response %s was answered in conversation %s: continue it with conversation, not previous_response_id", id, ref.Conversation.ID)
	}
	return nil
}

// conversationWhere names item i of a prompt whose first n items came
// from conversation id.
func conversationWhere(id string, n int) func(i int) string {
	return func(i int) string {
		if i < n {
			return fmt.Sprintf("conversation %s: item %d", id, i)
		}
		return fmt.Sprintf("input[%d]", i-n)
	}
}

// StoreError words a session store error as OpenAI would: an unknown
// conversation or item is a 404, a refused write a 400, a full store a
// 413, a store shutting down a 503.
func StoreError(err error, convID, itemID string) error {
	switch {
	case errors.Is(err, session.ErrNotFound) && itemID != "":
		return notFound("Item with id '%s' not found.", itemID)
	case errors.Is(err, session.ErrNotFound):
		return notFound("Conversation with id '%s' not found.", convID)
	case errors.Is(err, session.ErrInvalid):
		return wire.BadRequest("%v", err)
	case errors.Is(err, session.ErrQuota):
		return &wire.Error{Status: fasthttp.StatusRequestEntityTooLarge, Type: "invalid_request_error", Msg: fmt.Sprintf("the conversation store is full: %v", err)}
	case errors.Is(err, session.ErrClosed):
		return wire.Unavailable("the server is shutting down")
	}
	return wire.ServerError("the conversation store: %v", err)
}

// notFound is OpenAI's 404 for an id it does not know.
func notFound(format string, args ...any) *wire.Error {
	e := wire.NotFound(format, args...)
	e.Type, e.Code = "invalid_request_error", ""
	return e
}
