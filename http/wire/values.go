package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"time"
)

// Values more than one API reads or writes the same way.

// NewID returns a random id for a response or a message, after prefix.
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Number reads raw as a JSON number; ok is false for anything else (a
// number in a string among them).
func Number(raw []byte) (f float64, ok bool) {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, false
	}
	return f, true
}

// KeepAlive reads keep_alive (Ollama's, which the model routing applies
// to every API): a number of seconds or a Go duration string; ok is false
// when it is absent or null. A negative value keeps the model loaded for
// ever, 0 unloads it once idle; a duration past what time.Duration holds
// is for ever too.
func KeepAlive(raw json.RawMessage) (d time.Duration, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	if f, isNum := Number(raw); isNum {
		if f < 0 || f*float64(time.Second) >= float64(math.MaxInt64) {
			return -1, true, nil
		}
		return time.Duration(f * float64(time.Second)), true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false, BadParam("keep_alive", "keep_alive must be a number of seconds or a duration string")
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, false, BadParam("keep_alive", "keep_alive: %v", err)
	}
	if d < 0 {
		d = -1
	}
	return d, true, nil
}
