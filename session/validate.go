package session

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// validID says whether s can be an id: 1..MaxIDLen of [A-Za-z0-9_-]. Every
// id a caller hands in is checked before any lookup.
func validID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkID(what, id string) error {
	if !validID(id) {
		return fmt.Errorf("session: %s %q: %w id (1..%d of A-Z a-z 0-9 _ -)", what, clip(id), ErrInvalid, MaxIDLen)
	}
	return nil
}

// clip keeps an error message short whatever a caller sent.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// checkMetadata applies OpenAI's bounds: at most 16 pairs, keys up to 64
// characters, values up to 512, all valid UTF-8.
func checkMetadata(m map[string]string) error {
	if len(m) > MaxMetadataPairs {
		return fmt.Errorf("session: metadata: %w: %d pairs, at most %d", ErrInvalid, len(m), MaxMetadataPairs)
	}
	for k, v := range m {
		if k == "" || !utf8.ValidString(k) || utf8.RuneCountInString(k) > MaxMetadataKeyLen {
			return fmt.Errorf("session: metadata key %q: %w (1..%d characters of UTF-8)", clip(k), ErrInvalid, MaxMetadataKeyLen)
		}
		if !utf8.ValidString(v) || utf8.RuneCountInString(v) > MaxMetadataValueLen {
			return fmt.Errorf("session: metadata value of %q: %w (at most %d characters of UTF-8)", clip(k), ErrInvalid, MaxMetadataValueLen)
		}
	}
	return nil
}

// prefixes are the id prefixes OpenAI uses for each item type.
var prefixes = map[string]string{
	"message":                 "msg_",
	"function_call":           "fc_",
	"function_call_output":    "fco_",
	"reasoning":               "rs_",
	"custom_tool_call":        "ctc_",
	"custom_tool_call_output": "ctco_",
	"web_search_call":         "ws_",
	"file_search_call":        "fs_",
	"computer_call":           "cu_",
	"computer_call_output":    "cuo_",
	"image_generation_call":   "ig_",
	"mcp_call":                "mcp_",
}

// newID is prefix and 48 hex digits of randomness, as OpenAI's ids look.
func newID(prefix string) string {
	var b [24]byte
	rand.Read(b[:]) // never fails (crypto/rand's documented contract)
	return prefix + hex.EncodeToString(b[:])
}

func itemPrefix(typ string) string {
	if p, ok := prefixes[typ]; ok {
		return p
	}
	return "item_"
}

// prepareItems checks items and fills in what the store assigns: an id
// from the type when empty, the time when zero. It returns copies; the
// caller's slice is not touched.
func prepareItems(in []Item, maxBytes int, now int64) ([]Item, error) {
	out := make([]Item, len(in))
	seen := make(map[string]bool, len(in))
	total := 0
	for i, it := range in {
		if total += len(it.Data); total > maxRecordBytes/2 { // before any copy: one record holds them all
			return nil, fmt.Errorf("session: items: %w: more than %d bytes in one write", ErrQuota, maxRecordBytes/2)
		}
		if it.Type == "" || len(it.Type) > MaxTypeLen || !validID(it.Type) {
			return nil, fmt.Errorf("session: item %d type %q: %w", i, clip(it.Type), ErrInvalid)
		}
		if it.ID == "" {
			it.ID = newID(itemPrefix(it.Type))
		} else if err := checkID(fmt.Sprintf("item %d id", i), it.ID); err != nil {
			return nil, err
		}
		if seen[it.ID] {
			return nil, fmt.Errorf("session: item %d id %s: %w: given twice", i, it.ID, ErrInvalid)
		}
		seen[it.ID] = true
		if len(it.Data) > maxBytes {
			return nil, fmt.Errorf("session: item %d data: %w: %d bytes, at most %d", i, ErrInvalid, len(it.Data), maxBytes)
		}
		var compact bytes.Buffer // as the log will hold it, so a restart reads back the same bytes
		if len(it.Data) == 0 || json.Compact(&compact, it.Data) != nil {
			return nil, fmt.Errorf("session: item %d data: %w: not JSON", i, ErrInvalid)
		}
		it.Data = compact.Bytes()
		if it.CreatedAt == 0 {
			it.CreatedAt = now
		}
		out[i] = it
	}
	return out, nil
}

func checkPin(p Pin, maxTokens int) error {
	if p.Key == "" || len(p.Key) > MaxPinKeyLen || !utf8.ValidString(p.Key) {
		return fmt.Errorf("session: pin key: %w (1..%d bytes of UTF-8)", ErrInvalid, MaxPinKeyLen)
	}
	if p.Model == "" || len(p.Model) > MaxModelLen || !utf8.ValidString(p.Model) {
		return fmt.Errorf("session: pin %q model: %w (1..%d bytes of UTF-8)", clip(p.Key), ErrInvalid, MaxModelLen)
	}
	if len(p.Tokens) == 0 || len(p.Tokens) > maxTokens {
		return fmt.Errorf("session: pin %q: %w: %d tokens, 1..%d", clip(p.Key), ErrInvalid, len(p.Tokens), maxTokens)
	}
	if !time.Unix(0, p.Expires.UnixNano()).Equal(p.Expires) {
		return fmt.Errorf("session: pin %q expiry: %w: outside the years 1678..2262", clip(p.Key), ErrInvalid)
	}
	for _, t := range p.Tokens {
		if t < 0 {
			return fmt.Errorf("session: pin %q: %w: negative token %d", clip(p.Key), ErrInvalid, t)
		}
	}
	return nil
}
