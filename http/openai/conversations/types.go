package conversations

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"superfluid/http/wire"
	"superfluid/session"
	"superfluid/task"
)

// The Conversations API's shapes, as OpenAI documents them and the
// openai-go client decodes them, and the reading of their bodies.

// convObject is a conversation: POST /v1/conversations, GET, POST (its
// metadata), DELETE of an item, fork and trim answer it.
type convObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"` // "conversation"
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

func convOf(c session.Conversation) convObject {
	meta := c.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return convObject{ID: c.ID, Object: "conversation", CreatedAt: c.CreatedAt, Metadata: meta}
}

// convDeleted answers DELETE /v1/conversations/{id}.
type convDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "conversation.deleted"
	Deleted bool   `json:"deleted"`
}

// itemList is a page of items (GET …/items) or the items just added
// (POST …/items).
type itemList struct {
	Object  string            `json:"object"` // "list"
	Data    []json.RawMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

func listOf(items []session.Item, hasMore bool) itemList {
	l := itemList{Object: "list", Data: make([]json.RawMessage, 0, len(items)), HasMore: hasMore}
	for _, it := range items {
		l.Data = append(l.Data, it.Data)
	}
	if len(items) > 0 {
		l.FirstID, l.LastID = &items[0].ID, &items[len(items)-1].ID
	}
	return l
}

// OpenAI's bounds on a request.
const (
	maxItemsPerRequest = 20  // items in one create or add
	maxMetadataPairs   = 16  // metadata keys
	maxMetadataKey     = 64  // characters in a key
	maxMetadataValue   = 512 // characters in a value
	maxListLimit       = 100 // items in one page
	defaultListLimit   = 20
)

// decodeFields reads a JSON object body into its fields, refusing any
// field not in known by name (a field the server would ignore is never
// silently dropped).
func decodeFields(body []byte, known ...string) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := wire.DecodeBody(body, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, wire.BadRequest("the request body must be a JSON object")
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(known, name) {
			return nil, wire.BadParam(name, "Unknown parameter: '%s'.", name)
		}
	}
	return fields, nil
}

// readMetadata reads metadata: an object of at most 16 strings, keys of
// at most 64 characters and values of at most 512; null or absent is none.
func readMetadata(raw json.RawMessage) (map[string]string, error) {
	if task.IsNull(raw) {
		return map[string]string{}, nil
	}
	var meta map[string]string
	if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
		return nil, wire.BadParam("metadata", "metadata must be an object whose values are strings")
	}
	if len(meta) > maxMetadataPairs {
		return nil, wire.BadParam("metadata", "metadata has %d keys; at most %d are allowed", len(meta), maxMetadataPairs)
	}
	for k, v := range meta {
		switch {
		case k == "":
			return nil, wire.BadParam("metadata", "a metadata key is empty")
		case utf8.RuneCountInString(k) > maxMetadataKey:
			return nil, wire.BadParam("metadata", "the metadata key %.64q… is over %d characters", k, maxMetadataKey)
		case utf8.RuneCountInString(v) > maxMetadataValue:
			return nil, wire.BadParam("metadata", "metadata[%q] is over %d characters", k, maxMetadataValue)
		}
	}
	return meta, nil
}

// readItemList reads items: a list of at most 20 input items.
func readItemList(raw json.RawMessage, required bool) ([]json.RawMessage, error) {
	if task.IsNull(raw) {
		if required {
			return nil, wire.BadParam("items", "items is required: a list of at most %d items", maxItemsPerRequest)
		}
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, wire.BadParam("items", "items must be a list of input items")
	}
	if len(items) > maxItemsPerRequest {
		return nil, wire.BadParam("items", "items has %d entries; at most %d may be added at a time", len(items), maxItemsPerRequest)
	}
	if required && len(items) == 0 {
		return nil, wire.BadParam("items", "items is empty; add at least one item")
	}
	return items, nil
}

// readString reads a field that must be a string, when present.
func readString(fields map[string]json.RawMessage, name string) (string, bool, error) {
	raw, ok := fields[name]
	if !ok || task.IsNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, wire.BadParam(name, "%s must be a string", name)
	}
	return s, true, nil
}

// readCount reads a field that must be a non-negative integer.
func readCount(raw json.RawMessage, name string) (int, error) {
	f, ok := wire.Number(raw)
	if !ok || f < 0 || f != float64(int64(f)) || f > 1<<31 {
		return 0, wire.BadParam(name, "%s must be a non-negative integer, not %s", name, clip(raw))
	}
	return int(f), nil
}

// clip is a raw value for an error message, cut short.
func clip(raw json.RawMessage) string {
	if len(raw) > 40 {
		return strings.ToValidUTF8(string(raw[:40]), "") + "…"
	}
	return string(raw)
}
