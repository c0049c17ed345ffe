package http

import (
	"encoding/json"

	"superfluid/engine"
	"superfluid/task"
)

// The prompt field of the completion APIs is read in the core
// (task.ParsePrompts); these are its names in the llama.cpp files, its
// errors as apiErrors, until they move into their own package.

type promptPiece = task.PromptPiece

func parsePrompts(raw json.RawMessage, field string) ([][]promptPiece, error) {
	return apiResult(task.ParsePrompts(raw, field))
}

func promptTokens(m *Model, pieces []promptPiece, field string) ([]engine.Token, error) {
	return apiResult(task.PromptTokens(m.core(), pieces, field))
}

func decodeAny(raw json.RawMessage) (any, error) { return task.DecodeAny(raw) }
