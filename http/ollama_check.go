package http

import (
	"bytes"
	"encoding/json"
	"time"

	"superfluid/engine"
)

// ollamaCheckModel answers an unknown model as Ollama does: 404 and a hint
// to pull it. A missing name is a 400, as in Ollama.
func ollamaCheckModel(m *Model, name string) error {
	if name == "" {
		return badParam("model", "model is required")
	}
	if checkModelName(m, name) != nil {
		return notFound("model %q not found, try pulling it first", name)
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
// generate: "unload" when keep_alive is 0, else "load". Neither changes
// anything here; the model stays loaded.
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
// seconds or a Go duration string). Its value is then ignored: the server
// serves the one model it was started with and keeps it loaded.
func checkKeepAlive(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if _, ok := optionNumber(raw); ok {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return badParam("keep_alive", "keep_alive must be a number of seconds or a duration string")
	}
	if _, err := time.ParseDuration(s); err != nil {
		return badParam("keep_alive", "keep_alive: %v", err)
	}
	return nil
}

// keepAliveZero reports keep_alive 0: the client asks to unload.
func keepAliveZero(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if f, ok := optionNumber(raw); ok {
		return f == 0
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		d, err := time.ParseDuration(s)
		return err == nil && d == 0
	}
	return false
}
