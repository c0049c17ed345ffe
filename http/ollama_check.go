package http

import (
	"bytes"
	"encoding/json"
	"math"
	"time"

	"superfluid/engine"
)

// ollamaCheckModel refuses a request that names no model, as Ollama does
// (400). The route resolved a named one already (modelError words an
// unknown one as Ollama does: 404 and a hint to pull it).
func ollamaCheckModel(name string) error {
	if name == "" {
		return badParam("model", "model is required")
	}
	return nil
}

// ollamaCheckCommon checks what /api/generate and /api/chat share.
func ollamaCheckCommon(keepAlive json.RawMessage, top int) error {
	if err := checkKeepAlive(keepAlive); err != nil {
		return err
	}
	if top < 0 || top > engine.MaxLogprobs {
		return badParam("top_logprobs", "top_logprobs must be between 0 and %d", engine.MaxLogprobs)
	}
	return nil
}

// ollamaThink reads think: a boolean, or a level ("low", "medium",
// "high", "max") that also turns thinking on and reaches the template as
// reasoning_effort (gpt-oss's levels; "max" is its highest).
func ollamaThink(raw json.RawMessage) (on *bool, effort string, err error) {
	yes, no := true, false
	switch t := string(bytes.TrimSpace(raw)); t {
	case "", "null":
		return nil, "", nil
	case "false":
		return &no, "", nil
	case "true":
		return &yes, "", nil
	case `"high"`, `"medium"`, `"low"`:
		return &yes, t[1 : len(t)-1], nil
	case `"max"`:
		return &yes, "high", nil
	}
	return nil, "", badParam("think", "think must be a boolean or one of \"high\", \"medium\", \"low\", \"max\"")
}

// loadReason is Ollama's done_reason for a request with nothing to
// generate: "unload" when keep_alive is 0, else "load". The route loaded
// the model already; keep_alive 0 unloads it as the request ends.
func loadReason(keepAlive json.RawMessage) string {
	if keepAliveZero(keepAlive) {
		return "unload"
	}
	return "load"
}

// hasItems reports whether raw is a non-empty JSON array (or any other
// non-null value, which is no valid list of images either).
func hasItems(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	var items []json.RawMessage
	return json.Unmarshal(raw, &items) != nil || len(items) > 0
}

// checkKeepAlive validates keep_alive as Ollama parses it (a number of
// seconds or a Go duration string). The route applies it (modelWantOf):
// the registry keeps the model loaded that long after the request.
func checkKeepAlive(raw json.RawMessage) error {
	_, _, err := parseKeepAlive(raw)
	return err
}

// parseKeepAlive reads keep_alive: a number of seconds or a Go duration
// string; ok is false when it is absent or null. A negative value keeps
// the model loaded for ever, 0 unloads it once idle; a duration past what
// time.Duration holds is for ever too.
func parseKeepAlive(raw json.RawMessage) (d time.Duration, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	if f, isNum := optionNumber(raw); isNum {
		if f < 0 || f*float64(time.Second) >= float64(math.MaxInt64) {
			return -1, true, nil
		}
		return time.Duration(f * float64(time.Second)), true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false, badParam("keep_alive", "keep_alive must be a number of seconds or a duration string")
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, false, badParam("keep_alive", "keep_alive: %v", err)
	}
	if d < 0 {
		d = -1
	}
	return d, true, nil
}

// keepAliveZero reports keep_alive 0: the client asks to unload.
func keepAliveZero(raw json.RawMessage) bool {
	d, ok, err := parseKeepAlive(raw)
	return err == nil && ok && d == 0
}
