package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"superfluid/engine"
	"superfluid/media"
	"superfluid/task"
)

// MaxPrompts bounds the prompts one request may carry.
const MaxPrompts = 64

// PromptPiece is a run of one prompt: text to tokenize, or token ids to use
// as they are.
type PromptPiece struct {
	Text   string
	Tokens []engine.Token
	IsText bool
	// Images are the files the text's media markers stand for, in order
	// (llama.cpp's {prompt_string, multimodal_data} prompt object).
	Images [][]byte
}

// ParsePrompts reads a prompt field the way llama.cpp's server does
// (tokenize_input_prompts), which also covers OpenAI's shapes: a string, or
// an array that mixes token ids and strings, is one prompt; an array of
// token ids is one prompt; any other array is a list of prompts, each a
// string, an array of token ids or a mixed array. Token ids are checked
// against the vocabulary when the prompt is rendered.
func ParsePrompts(raw json.RawMessage, field string) ([][]PromptPiece, error) {
	v, err := DecodeAny(raw)
	if err != nil {
		return nil, BadParam(field, "%s: %v", field, err)
	}
	switch x := v.(type) {
	case nil:
		return nil, BadParam(field, "%s is required", field)
	case string:
		return [][]PromptPiece{{{Text: x, IsText: true}}}, nil
	case map[string]any:
		p, err := mediaPrompt(x, field)
		if err != nil {
			return nil, err
		}
		return [][]PromptPiece{p}, nil
	case []any:
		if len(x) == 0 {
			return nil, BadParam(field, "%s is an empty array", field)
		}
		if one, ok, err := singlePrompt(x, field); err != nil || ok {
			return [][]PromptPiece{one}, err
		}
		if len(x) > MaxPrompts {
			return nil, BadParam(field, "%s holds %d prompts; at most %d", field, len(x), MaxPrompts)
		}
		out := make([][]PromptPiece, 0, len(x))
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
func singlePrompt(x []any, field string) (pieces []PromptPiece, ok bool, err error) {
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
func promptElement(e any, field string, i int) ([]PromptPiece, error) {
	switch y := e.(type) {
	case string:
		return []PromptPiece{{Text: y, IsText: true}}, nil
	case []any:
		if len(y) == 0 {
			return nil, BadParam(field, "%s[%d] is an empty array", field, i)
		}
		return mixedPieces(y, field)
	case map[string]any:
		return mediaPrompt(y, fmt.Sprintf("%s[%d]", field, i))
	}
	return nil, BadParam(field, "%s[%d] must be a string or an array of token ids", field, i)
}

// mixedPieces reads an array of token ids and strings into pieces,
// merging runs of ids.
func mixedPieces(x []any, field string) ([]PromptPiece, error) {
	var out []PromptPiece
	for _, e := range x {
		switch y := e.(type) {
		case string:
			out = append(out, PromptPiece{Text: y, IsText: true})
		case json.Number:
			id, err := y.Int64()
			if err != nil || id < 0 || id > math.MaxInt32 {
				return nil, BadParam(field, "%s: %s is not a token id", field, y)
			}
			if len(out) == 0 || out[len(out)-1].IsText {
				out = append(out, PromptPiece{})
			}
			last := &out[len(out)-1]
			last.Tokens = append(last.Tokens, engine.Token(id))
		default:
			return nil, BadParam(field, "%s: a prompt array holds token ids and strings only", field)
		}
	}
	return out, nil
}

// DecodeAny decodes raw JSON keeping numbers exact (absent or null: nil).
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

// PromptTokens renders one prompt to tokens: text is tokenized with
// special-token parsing, and BOS is added when the prompt starts with text
// and the model wants it (llama.cpp's rule).
func PromptTokens(m *task.Model, pieces []PromptPiece, field string) ([]engine.Token, error) {
	text := 0
	for _, p := range pieces {
		text += len(p.Text)
	}
	if err := task.CheckPromptBytes(m.Desc, field, text); err != nil {
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
		toks, err := task.Tokenize(m, p.Text, i == 0)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}

// PromptText is a prompt as text, for OpenAI's echo: the string as sent,
// or the tokens rendered without special tokens.
func PromptText(m *task.Model, pieces []PromptPiece, toks []engine.Token) string {
	if len(pieces) == 1 && pieces[0].IsText {
		return pieces[0].Text
	}
	return m.Text.Detokenize(toks, false)
}

// mediaPrompt reads llama.cpp's multimodal prompt object: prompt_string,
// whose media markers stand for multimodal_data's base64 files in order.
// Other keys are refused by name; the images are checked when the prompt
// is tokenized (task.NewMediaPrompt).
func mediaPrompt(obj map[string]any, field string) ([]PromptPiece, error) {
	text, ok := obj["prompt_string"].(string)
	if !ok {
		return nil, BadParam(field, "%s: a prompt object needs prompt_string, a string", field)
	}
	var images [][]byte
	switch data := obj["multimodal_data"].(type) {
	case nil:
	case []any:
		if len(data) > media.MaxImages {
			return nil, BadParam(field+".multimodal_data", "%s.multimodal_data: %d files; a request carries at most %d", field, len(data), media.MaxImages)
		}
		for i, d := range data {
			s, ok := d.(string)
			if !ok {
				return nil, BadParam(field+".multimodal_data", "%s.multimodal_data[%d] must be a base64 string", field, i)
			}
			b, err := media.DecodeBase64(s, MaxMediaBytes)
			if err != nil {
				return nil, BadParam(field+".multimodal_data", "%s.multimodal_data[%d]: %v", field, i, err)
			}
			images = append(images, b)
		}
	default:
		return nil, BadParam(field+".multimodal_data", "%s.multimodal_data must be an array of base64 strings", field)
	}
	for k := range obj {
		if k != "prompt_string" && k != "multimodal_data" {
			return nil, BadParam(field, "%s: the prompt object's field %q is not supported", field, k)
		}
	}
	return []PromptPiece{{Text: text, IsText: true, Images: images}}, nil
}

// RefusePromptImages refuses prompts of which a prompt object carries
// images, on a route that takes none (why says so and where they go):
// dropped, the markers would reach the model as text.
func RefusePromptImages(prompts [][]PromptPiece, field, why string) error {
	for _, pieces := range prompts {
		for _, p := range pieces {
			if len(p.Images) > 0 {
				return NotSupported(field+".multimodal_data", why)
			}
		}
	}
	return nil
}

// MaxMediaBytes bounds one image file a request carries (decoded).
const MaxMediaBytes = 20 << 20
