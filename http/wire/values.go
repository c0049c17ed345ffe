package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
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

// ValidText is b as a string with any invalid UTF-8 dropped: a token may
// be part of a character, and a JSON string must hold whole ones.
func ValidText(b []byte) string { return strings.ToValidUTF8(string(b), "") }

// FiniteLogprob keeps a logprob JSON can carry: llama.cpp reports the
// lowest float for an impossible token, since JSON has no -Inf.
func FiniteLogprob(x float32) float64 {
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return -math.MaxFloat32
	}
	return float64(x)
}

// Widen writes float32 values as the float64 they are exactly, so a client
// parsing the JSON into float64 (openai-go, Python) gets bit for bit what
// it decodes from the base64 of the same vector; float32's own shortest
// decimal would parse to a neighbouring float64.
func Widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
