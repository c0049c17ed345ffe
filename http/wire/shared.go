package wire

// Small helpers two or more APIs share.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"superfluid/reply"
)

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

// ValidText is a token's text without the bytes of a split character, as
// llama.cpp shows it; "bytes" carries them all.
func ValidText(b []byte) string { return strings.ToValidUTF8(string(b), "") }

// FiniteLogprob keeps a logprob JSON can carry: llama.cpp reports the
// lowest float for an impossible token, since JSON has no -Inf.
func FiniteLogprob(x float32) float64 {
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return -math.MaxFloat32
	}
	return float64(x)
}

// Milliseconds is d as the timings fields report it, in fractional ms.
func Milliseconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// CallID is the id a call is reported with: the model's own, else a new
// one. Clients send it back with the tool's result, which is how the
// template ties the two.
func CallID(c reply.ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return NewID("call_")
}

// CallArguments returns a call's arguments as a JSON object: raw is a JSON
// string holding one, or the object itself.
func CallArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("not a valid JSON string")
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			// Clients send "" for a call that takes no arguments.
			return json.RawMessage(`{}`), nil
		}
	}
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("must be a JSON object (or a string holding one)")
	}
	return raw, nil
}
