package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"superfluid/engine"
	"superfluid/task"
)

// The shapes an embedding request's inputs come in. OpenAI's input is a
// string, an array of strings, an array of token ids, or an array of such
// arrays; llama.cpp's server takes the same and also mixes strings and
// token arrays in one array; Ollama's is a string or an array of strings.

// EmbedInputShapes says which shapes a field accepts.
type EmbedInputShapes struct {
	Tokens bool // token ids (a flat array, or arrays of them)
	Mixed  bool // strings and token arrays in one array (llama.cpp)
}

// ParseEmbedInputs reads an input field of any shape the API accepts.
// Token ids are checked against the vocabulary: one outside it would read
// past the embedding table.
func ParseEmbedInputs(raw json.RawMessage, field string, shapes EmbedInputShapes, vocab int) ([]task.EmbedInput, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, BadParam(field, "%s is required", field)
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, BadParam(field, "%s: %v", field, err)
		}
		return []task.EmbedInput{{Text: s}}, nil
	case '[':
	default:
		return nil, BadParam(field, "%s must be a string or an array, got %s", field, jsonKind(raw))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, BadParam(field, "%s: %v", field, err)
	}
	if len(elems) > task.MaxEmbedInputs {
		return nil, BadParam(field, "%s has %d elements; at most %d inputs are embedded in one request", field, len(elems), task.MaxEmbedInputs)
	}
	if len(elems) > 0 && isNumber(elems[0]) {
		if !shapes.Tokens {
			return nil, BadParam(field, "%s must be a string or an array of strings", field)
		}
		toks, err := TokenIDs(elems, field, field, vocab)
		if err != nil {
			return nil, err
		}
		return []task.EmbedInput{{Tokens: toks, IsTokens: true}}, nil
	}
	out := make([]task.EmbedInput, 0, len(elems))
	for i, e := range elems {
		e = bytes.TrimSpace(e)
		switch {
		case len(e) > 0 && e[0] == '"':
			var s string
			if err := json.Unmarshal(e, &s); err != nil {
				return nil, BadParam(field, "%s[%d]: %v", field, i, err)
			}
			out = append(out, task.EmbedInput{Text: s})
		case len(e) > 0 && e[0] == '[' && shapes.Tokens:
			var ids []json.RawMessage
			if err := json.Unmarshal(e, &ids); err != nil {
				return nil, BadParam(field, "%s[%d]: %v", field, i, err)
			}
			toks, err := TokenIDs(ids, fmt.Sprintf("%s[%d]", field, i), field, vocab)
			if err != nil {
				return nil, err
			}
			out = append(out, task.EmbedInput{Tokens: toks, IsTokens: true})
		default:
			want := "a string"
			if shapes.Tokens {
				want = "a string or an array of token ids"
			}
			return nil, BadParam(field, "%s[%d] must be %s, got %s", field, i, want, jsonKind(e))
		}
	}
	if !shapes.Mixed && len(out) > 1 {
		for i := range out[1:] {
			if out[i+1].IsTokens != out[0].IsTokens {
				return nil, BadParam(field, "%s mixes strings and token arrays", field)
			}
		}
	}
	return out, nil
}

// TokenIDs reads an array of token ids, each an integer in the vocabulary;
// label names the array in errors.
func TokenIDs(elems []json.RawMessage, label, field string, vocab int) ([]engine.Token, error) {
	toks := make([]engine.Token, len(elems))
	for i, e := range elems {
		var f float64
		if !isNumber(e) || json.Unmarshal(e, &f) != nil || f != math.Trunc(f) {
			return nil, BadParam(field, "%s: token %d must be an integer token id, got %s", label, i, bytes.TrimSpace(e))
		}
		if f < 0 || f >= float64(vocab) {
			return nil, BadParam(field, "%s: token %d is %g, outside the vocabulary of %d", label, i, f, vocab)
		}
		toks[i] = engine.Token(f)
	}
	return toks, nil
}

func isNumber(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// jsonKind names the JSON type of raw for an error message.
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
