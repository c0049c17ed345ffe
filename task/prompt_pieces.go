package task

import (
	"superfluid/engine"
)

// PromptPiece is a run of one prompt as the completion APIs send it: text
// to tokenize, or token ids to use as they are (wire.ParsePrompts reads
// them from a request).
type PromptPiece struct {
	Text   string
	Tokens []engine.Token
	IsText bool
}

// PromptTokens renders one prompt to tokens: text is tokenized with
// special-token parsing, and BOS is added when the prompt starts with text
// and the model wants it (llama.cpp's rule).
func PromptTokens(m *Model, pieces []PromptPiece, field string) ([]engine.Token, error) {
	text := 0
	for _, p := range pieces {
		text += len(p.Text)
	}
	if err := CheckPromptBytes(m.Desc, field, text); err != nil {
		return nil, err
	}
	var out []engine.Token
	for i, p := range pieces {
		if !p.IsText {
			for _, t := range p.Tokens {
				if int(t) >= m.Desc.Vocab {
					return nil, BadParam(field, "%s: token id %d is outside the vocabulary of %d", field, t, m.Desc.Vocab)
				}
			}
			out = append(out, p.Tokens...)
			continue
		}
		toks, err := Tokenize(m, p.Text, i == 0)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}

// PromptText is a prompt as text, for OpenAI's echo: the string as sent,
// or the tokens rendered without special tokens.
func PromptText(m *Model, pieces []PromptPiece, toks []engine.Token) string {
	if len(pieces) == 1 && pieces[0].IsText {
		return pieces[0].Text
	}
	return m.Text.Detokenize(toks, false)
}
