package session

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// op is a record's type: its first payload byte. The numbers are the
// on-disk format: never renumber one.
type op uint8

const (
	opCreate     op = 1  // Conv, At, Meta, Items: a new conversation with its first items
	opAppend     op = 2  // Conv, At, Items: items added at the end (one without Data: a stored item shared)
	opSetMeta    op = 3  // Conv, At, Meta: metadata replaced
	opDelete     op = 4  // Conv: the conversation gone (its items when no other holds them)
	opDeleteItem op = 5  // Conv, At, Item: one item out of one conversation
	opFork       op = 6  // Conv (new), From, Item ("" = all), At, Meta: shares From's items up to Item
	opTrimFront  op = 7  // Conv, At, N: the first N items dropped
	opTrimAfter  op = 8  // Conv, At, Item: every item after Item dropped
	opPin        op = 9  // Pin: a pin recorded (replacing one of its key)
	opUnpin      op = 10 // Key: a pin dropped
	opSnapItem   op = 20 // snapshot only: Items (one): a live item
	opSnapConv   op = 21 // snapshot only: Conv, Created, At, Meta, Refs: a live conversation
	opSnapEnd    op = 22 // snapshot only: N = records before it; a snapshot without it is not used
)

func (o op) String() string {
	switch o {
	case opCreate:
		return "create"
	case opAppend:
		return "append"
	case opSetMeta:
		return "set-metadata"
	case opDelete:
		return "delete"
	case opDeleteItem:
		return "delete-item"
	case opFork:
		return "fork"
	case opTrimFront:
		return "trim-front"
	case opTrimAfter:
		return "trim-after"
	case opPin:
		return "pin"
	case opUnpin:
		return "unpin"
	case opSnapItem:
		return "snapshot-item"
	case opSnapConv:
		return "snapshot-conversation"
	case opSnapEnd:
		return "snapshot-end"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// event is a record's body, JSON after the op byte. Fields a type does
// not use are left out.
type event struct {
	Op      op                `json:"-"`
	Conv    string            `json:"c,omitempty"`
	At      int64             `json:"t,omitempty"`  // unix seconds of the write
	Created int64             `json:"ct,omitempty"` // snapshot: the conversation's creation
	Meta    map[string]string `json:"m,omitempty"`
	Items   []itemRec         `json:"i,omitempty"`
	From    string            `json:"f,omitempty"`
	Item    string            `json:"it,omitempty"`
	N       int               `json:"n,omitempty"`
	Refs    []string          `json:"r,omitempty"`
	Pin     *pinRec           `json:"p,omitempty"`
	Key     string            `json:"k,omitempty"`
}

type itemRec struct {
	ID        string          `json:"id"`
	Type      string          `json:"ty"`
	Data      json.RawMessage `json:"d,omitempty"` // none: a reference to the stored item of this id
	CreatedAt int64           `json:"ct"`
}

type pinRec struct {
	Key     string  `json:"k"`
	Model   string  `json:"m"`
	Tokens  []int32 `json:"tk"`
	Expires int64   `json:"x"` // unix nanoseconds
}

func toRecs(items []Item) []itemRec {
	out := make([]itemRec, len(items))
	for i, it := range items {
		out[i] = itemRec{ID: it.ID, Type: it.Type, Data: it.Data, CreatedAt: it.CreatedAt}
	}
	return out
}

func (r itemRec) item() Item {
	return Item{ID: r.ID, Type: r.Type, Data: r.Data, CreatedAt: r.CreatedAt}
}

// encodePayload is the op byte then the JSON body. HTML is not escaped,
// so an item's Data, compacted when it was stored, is written byte for
// byte and reads back the same after a restart.
func encodePayload(ev *event) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(ev.Op))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, fmt.Errorf("session: encoding %s: %w", ev.Op, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func decodePayload(p []byte) (*event, error) {
	if len(p) < 1 {
		return nil, fmt.Errorf("session: empty record")
	}
	ev := &event{Op: op(p[0])}
	if err := json.Unmarshal(p[1:], ev); err != nil {
		return nil, fmt.Errorf("session: decoding %s: %w", ev.Op, err)
	}
	return ev, nil
}
