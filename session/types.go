package session

import (
	"encoding/json"
	"errors"
	"time"
)

// Item is one conversation item. It is stored once and referenced by every
// conversation that holds it (a fork shares its source's items). An Item
// the store returns shares its Data with the store: read it, never write
// to it.
type Item struct {
	ID        string          // "msg_…", "fc_…", …; Append assigns one from Type when empty
	Type      string          // "message", "function_call", …: opaque to the store
	Data      json.RawMessage // the item as the API shapes it: opaque, but valid JSON
	CreatedAt int64           // unix seconds; Append sets it when zero
}

// Conversation is a conversation's header; its items are read with Items,
// Item or All.
type Conversation struct {
	ID        string // "conv_…"
	Metadata  map[string]string
	CreatedAt int64 // unix seconds
	Len       int   // number of items
}

// Pin records a prefix-cache pin that must outlive a restart: the tokens of
// the pinned prefix under a model, until Expires. The tokens are kept
// rather than a digest so start-up can pin again without the request that
// made the pin.
type Pin struct {
	Key     string
	Model   string
	Tokens  []int32
	Expires time.Time
}

// Options bound the store. A zero bound takes its default; a negative one
// means none.
type Options struct {
	// MaxBytes bounds the live state (items, conversations, pins) as a
	// snapshot would hold it, estimated; a write past it fails with
	// ErrQuota. The disk holds about twice this at most (CompactBytes).
	MaxBytes int64
	// MaxConversations bounds the live conversations (ErrQuota past it).
	MaxConversations int
	// MaxItemsPerConversation bounds one conversation's length (at most
	// HardMaxItemsPerConversation, which a negative one means).
	MaxItemsPerConversation int
	// Retention deletes conversations written to no later than this ago;
	// they read as not found at once and leave the disk at the next
	// compaction (or Open). Zero or negative: kept until deleted.
	Retention time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// MaxItemBytes bounds one item's Data (default 1 MiB).
	MaxItemBytes int
	// MaxPins bounds the live pins (default 4096); MaxPinTokens one pin's
	// tokens (default 1<<20).
	MaxPins      int
	MaxPinTokens int
	// CompactBytes is the log size past which the live state is written to
	// a snapshot and a fresh log begun (default 64 MiB, or MaxBytes/2 when
	// that is smaller, but not under 64 KiB). A snapshot larger than it
	// raises the bound to its own size, so the disk holds at most the
	// snapshot and a log as large (or CompactBytes), plus one group.
	CompactBytes int64
}

// Defaults for a zero Options field.
const (
	DefaultMaxBytes                = 4 << 30
	DefaultMaxConversations        = 100_000
	DefaultMaxItemsPerConversation = 10_000
	DefaultMaxItemBytes            = 1 << 20
	DefaultMaxPins                 = 4096
	DefaultMaxPinTokens            = 1 << 20
	DefaultCompactBytes            = 64 << 20
	minCompactBytes                = 64 << 10

	// HardMaxItemsPerConversation is the most MaxItemsPerConversation can
	// be: a snapshot's conversation record lists its item ids, and a
	// record is at most 64 MiB.
	HardMaxItemsPerConversation = maxRecordBytes / (MaxIDLen + 4)
)

// OpenAI's bounds on metadata, and ours on ids.
const (
	MaxMetadataPairs    = 16
	MaxMetadataKeyLen   = 64
	MaxMetadataValueLen = 512
	MaxIDLen            = 128
	MaxTypeLen          = 64
	MaxPinKeyLen        = 256
	MaxModelLen         = 256
)

// The errors a caller maps to an answer: each is returned wrapped with
// what was refused, so errors.Is works and the message names it.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid")
	ErrQuota    = errors.New("over quota")
	ErrClosed   = errors.New("session store closed")
)

func (o Options) withDefaults() Options {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxConversations == 0 {
		o.MaxConversations = DefaultMaxConversations
	}
	if o.MaxItemsPerConversation == 0 {
		o.MaxItemsPerConversation = DefaultMaxItemsPerConversation
	}
	if o.MaxItemsPerConversation < 0 || o.MaxItemsPerConversation > HardMaxItemsPerConversation {
		o.MaxItemsPerConversation = HardMaxItemsPerConversation // a snapshot holds a conversation's ids in one record
	}
	if o.MaxItemBytes <= 0 || o.MaxItemBytes > maxRecordBytes/4 {
		o.MaxItemBytes = DefaultMaxItemBytes
	}
	if o.MaxPins == 0 {
		o.MaxPins = DefaultMaxPins
	}
	if o.MaxPinTokens <= 0 || o.MaxPinTokens > maxRecordBytes/16 {
		o.MaxPinTokens = DefaultMaxPinTokens
	}
	if o.CompactBytes <= 0 {
		o.CompactBytes = DefaultCompactBytes
		if o.MaxBytes > 0 && o.MaxBytes/2 < o.CompactBytes {
			o.CompactBytes = o.MaxBytes / 2
		}
	}
	if o.CompactBytes < minCompactBytes {
		o.CompactBytes = minCompactBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
