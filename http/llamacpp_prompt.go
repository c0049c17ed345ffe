package http

import (
	"bytes"
	"encoding/json"
	"math"

	"superfluid/engine"
	"superfluid/http/wire"
)

// maxPrompts bounds the prompts one request may carry.
const maxPrompts = 64

// promptPiece is a run of one prompt: text to tokenize, or token ids to use
// as they are.
type promptPiece struct {
	text   string
	tokens []engine.Token
	isText bool
}

// parsePrompts reads a prompt field the way llama.cpp's server does
// (tokenize_input_prompts), which also covers OpenAI's shapes: a string, or
// an array that mixes token ids and strings, is one prompt; an array of
// token ids is one prompt; any other array is a list of prompts, each a
// string, an array of token ids or a mixed array. Token ids are checked
// against the vocabulary when the prompt is rendered.
func parsePrompts(raw json.RawMessage, field string) ([][]promptPiece, error) {
	v, err := decodeAny(raw)
	if err != nil {
		return nil, wire.BadParam(field, "%s: %v", field, err)
	}
	switch x := v.(type) {
	case nil:
		return nil, wire.BadParam(field, "%s is required", field)
	case string:
		return [][]promptPiece{{{text: x, isText: true}}}, nil
	case []any:
		if len(x) == 0 {
			return nil, wire.BadParam(field, "%s is an empty array", field)
		}
		if one, ok, err := singlePrompt(x, field); err != nil || ok {
			return [][]promptPiece{one}, err
		}
		if len(x) > maxPrompts {
			return nil, wire.BadParam(field, "%s holds %d prompts; at most %d", field, len(x), maxPrompts)
		}
		out := make([][]promptPiece, 0, len(x))
		for i, e := range x {
			p, err := promptElement(e, field, i)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}
	return nil, wire.BadParam(field, "%s must be a string, an array of token ids, or an array of prompts", field)
}

// singlePrompt reads an array that is one prompt: only token ids, or token
// ids and strings mixed. ok is false for a list of prompts.
func singlePrompt(x []any, field string) (pieces []promptPiece, ok bool, err error) {
	numbers, strs := 0, 0
	for _, e := range x {
		switch e.(type) {
		case json.Number:
			numbers++
		case string:
			strs++
		}
	}
	if numbers == 0 || numbers+strs != len(x) {
		return nil, false, nil
	}
	pieces, err = mixedPieces(x, field)
	return pieces, true, err
}

// promptElement reads one prompt of a list.
func promptElement(e any, field string, i int) ([]promptPiece, error) {
	switch y := e.(type) {
	case string:
		return []promptPiece{{text: y, isText: true}}, nil
	case []any:
		if len(y) == 0 {
			return nil, wire.BadParam(field, "%s[%d] is an empty array", field, i)
		}
		return mixedPieces(y, field)
	case map[string]any:
		return nil, wire.BadParam(field, "%s[%d]: multimodal prompts are not supported", field, i)
	}
	return nil, wire.BadParam(field, "%s[%d] must be a string or an array of token ids", field, i)
}

// mixedPieces reads an array of token ids and strings into pieces,
// merging runs of ids.
func mixedPieces(x []any, field string) ([]promptPiece, error) {
	var out []promptPiece
	for _, e := range x {
		switch y := e.(type) {
		case string:
			out = append(out, promptPiece{text: y, isText: true})
		case json.Number:
			id, err := y.Int64()
			if err != nil || id < 0 || id > math.MaxInt32 {
				return nil, wire.BadParam(field, "%s: %s is not a token id", field, y)
			}
			if len(out) == 0 || out[len(out)-1].isText {
				out = append(out, promptPiece{})
			}
			last := &out[len(out)-1]
			last.tokens = append(last.tokens, engine.Token(id))
		default:
			return nil, wire.BadParam(field, "%s: a prompt array holds token ids and strings only", field)
		}
	}
	return out, nil
}

// decodeAny decodes raw JSON keeping numbers exact (absent or null: nil).
func decodeAny(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// promptTokens renders one prompt to tokens: text is tokenized with
// special-token parsing, and BOS is added when the prompt starts with text
// and the model wants it (llama.cpp's rule).
func promptTokens(m *Model, pieces []promptPiece, field string) ([]engine.Token, error) {
	text := 0
	for _, p := range pieces {
		text += len(p.text)
	}
	if err := wire.CheckPromptBytes(&m.Model, field, text); err != nil {
		return nil, err
	}
	var out []engine.Token
	for i, p := range pieces {
		if !p.isText {
			for _, t := range p.tokens {
				if int(t) >= m.Desc.Vocab {
					return nil, wire.BadParam(field, "%s: token id %d is outside the vocabulary of %d", field, t, m.Desc.Vocab)
				}
			}
			out = append(out, p.tokens...)
			continue
		}
		toks, err := wire.Tokenize(&m.Model, p.text, i == 0)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}

// promptText is a prompt as text, for OpenAI's echo: the string as sent,
// or the tokens rendered without special tokens.
func promptText(m *Model, pieces []promptPiece, toks []engine.Token) string {
	if len(pieces) == 1 && pieces[0].isText {
		return pieces[0].text
	}
	return m.Text.Detokenize(toks, false)
}
