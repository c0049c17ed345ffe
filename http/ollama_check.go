package http

import (
	"bytes"
	"encoding/json"

	"superfluid/engine"
	"superfluid/http/wire"
)

// ollamaCheckModel refuses a request that names no model, as Ollama does
// (400). The route resolved a named one already (modelError words an
// unknown one as Ollama does: 404 and a hint to pull it).
func ollamaCheckModel(name string) error {
	if name == "" {
		return wire.BadParam("model", "model is required")
	}
	return nil
}

// ollamaCheckCommon checks what /api/generate and /api/chat share.
func ollamaCheckCommon(keepAlive json.RawMessage, top int) error {
	if err := checkKeepAlive(keepAlive); err != nil {
		return err
	}
	if top < 0 || top > engine.MaxLogprobs {
		return wire.BadParam("top_logprobs", "top_logprobs must be between 0 and %d", engine.MaxLogprobs)
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
	return nil, "", wire.BadParam("think", "think must be a boolean or one of \"high\", \"medium\", \"low\", \"max\"")
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
	_, _, err := wire.KeepAlive(raw)
	return err
}

// keepAliveZero reports keep_alive 0: the client asks to unload.
func keepAliveZero(raw json.RawMessage) bool {
	d, ok, err := wire.KeepAlive(raw)
	return err == nil && ok && d == 0
}
