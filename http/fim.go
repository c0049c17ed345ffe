package http

import (
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/task"
)

// fimPrompt is the request core's FIM prompt (task.FIMPrompt), its errors
// as apiErrors.
func fimPrompt(m *Model, r fim.Request, maxTokens int) ([]engine.Token, fim.Info, error) {
	toks, info, err := task.FIMPrompt(m.core(), r, maxTokens)
	return toks, info, apiErr(err)
}

// fimStops are the token texts a FIM completion must stop at besides the
// model's end-of-generation tokens: its own FIM markers (StarCoder2's
// <file_sep> is not EOG to llama.cpp, yet it ends a completion).
func fimStops(m *Model) []engine.Token { return m.FIMStops() }
