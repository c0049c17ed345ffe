package wire

import (
	"bytes"
	"encoding/json"
	"math"

	"superfluid/engine"
	"superfluid/task"
)

// MaxPrompts bounds the prompts one request may carry.
const MaxPrompts = 64

// ParsePrompts reads a prompt field the way llama.cpp's server does
// (tokenize_input_prompts), which also covers OpenAI's shapes: a string, or
// an array that mixes token ids and strings, is one prompt; an array of
// token ids is one prompt; any other array is a list of prompts, each a
// string, an array of token ids or a mixed array. Token ids are checked
// against the vocabulary when the prompt is rendered (task.PromptTokens).
func ParsePrompts(raw json.RawMessage, field string) ([][]task.PromptPiece, error) {
	v, err := DecodeAny(raw)
	if err != nil {
		return nil, BadParam(field, "%s: %v", field, err)
	}
	switch x := v.(type) {
	case nil:
		return nil, BadParam(field, "%s is required", field)
	case string:
		return [][]task.PromptPiece{{{Text: x, IsText: true}}}, nil
	case []any:
		if len(x) == 0 {
			return nil, BadParam(field, "%s is an empty array", field)
		}
		if one, ok, err := singlePrompt(x, field); err != nil || ok {
			return [][]task.PromptPiece{one}, err
		}
		if len(x) > MaxPrompts {
			return nil, BadParam(field, "%s holds %d prompts; at most %d", field, len(x), MaxPrompts)
		}
		out := make([][]task.PromptPiece, 0, len(x))
		for i, e := range x {
			p, err := promptElement(e, field, i)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}
	return nil, BadParam(field, "%s must be a string, an array of token ids, or an array of prompts", field)
}

// singlePrompt reads an array that is one prompt: only token ids, or token
// ids and strings mixed. ok is false for a list of prompts.
func singlePrompt(x []any, field string) (pieces []task.PromptPiece, ok bool, err error) {
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
func promptElement(e any, field string, i int) ([]task.PromptPiece, error) {
	switch y := e.(type) {
	case string:
		return []task.PromptPiece{{Text: y, IsText: true}}, nil
	case []any:
		if len(y) == 0 {
			return nil, BadParam(field, "%s[%d] is an empty array", field, i)
		}
		return mixedPieces(y, field)
	case map[string]any:
		return nil, BadParam(field, "%s[%d]: multimodal prompts are not supported", field, i)
	}
	return nil, BadParam(field, "%s[%d] must be a string or an array of token ids", field, i)
}

// mixedPieces reads an array of token ids and strings into pieces,
// merging runs of ids.
func mixedPieces(x []any, field string) ([]task.PromptPiece, error) {
	var out []task.PromptPiece
	for _, e := range x {
		switch y := e.(type) {
		case string:
			out = append(out, task.PromptPiece{Text: y, IsText: true})
		case json.Number:
			id, err := y.Int64()
			if err != nil || id < 0 || id > math.MaxInt32 {
				return nil, BadParam(field, "%s: %s is not a token id", field, y)
			}
			if len(out) == 0 || out[len(out)-1].IsText {
				out = append(out, task.PromptPiece{})
			}
			last := &out[len(out)-1]
			last.Tokens = append(last.Tokens, engine.Token(id))
		default:
			return nil, BadParam(field, "%s: a prompt array holds token ids and strings only", field)
		}
	}
	return out, nil
}

// DecodeAny decodes raw JSON keeping numbers exact (absent or null: nil),
// for fields of more than one shape.
func DecodeAny(raw json.RawMessage) (any, error) {
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
