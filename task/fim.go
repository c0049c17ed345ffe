package task

import (
	"errors"

	"superfluid/engine"
	"superfluid/fim"
)

// fimTokenizer tokenizes FIM parts as plain text: no BOS, and special-token
// text typed by the user stays text (it must not forge FIM markers).
type fimTokenizer struct{ t Text }

func (f fimTokenizer) Tokenize(text string) ([]engine.Token, error) {
	return f.t.Tokenize(text, false, false)
}

// FIMPrompt builds the prompt tokens of a fill-in-the-middle request in the
// model's own FIM format, leaving room for maxTokens (0: a default share)
// of generation. Every FIM endpoint (/infill, /v1/completions with suffix,
// /api/generate with suffix) comes through here.
func FIMPrompt(m *Model, r fim.Request, maxTokens int) ([]engine.Token, fim.Info, error) {
	if m.FIM == nil || !m.FIM.Capable() {
		return nil, fim.Info{}, &Error{Kind: NotSupported,
			Msg: "this model's vocabulary has no fill-in-the-middle tokens; it cannot complete with a suffix"}
	}
	room := maxTokens
	if room <= 0 {
		room = min(256, m.Desc.Ctx/4)
	}
	budget := m.Desc.Ctx - room
	if budget < 16 {
		return nil, fim.Info{}, BadRequest("max tokens %d leave no room for a prompt in a context of %d", maxTokens, m.Desc.Ctx)
	}
	r, dropped := BoundFIM(m.Desc, r)
	toks, info, err := m.FIM.Build(fimTokenizer{m.Text}, r, budget)
	info.ExtraDropped += dropped
	if errors.Is(err, fim.ErrBudget) {
		return nil, info, BadRequest("the context of %d tokens cannot hold the FIM format", m.Desc.Ctx)
	}
	if err != nil {
		return nil, info, BadRequest("%v", err)
	}
	return toks, info, nil
}
