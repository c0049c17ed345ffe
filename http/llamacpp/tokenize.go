package llamacpp

import (
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// tokenizeRequest is the body of POST /tokenize.
type tokenizeRequest struct {
	Content      *string `json:"content"`
	AddSpecial   bool    `json:"add_special"`   // BOS, where the model adds one
	ParseSpecial *bool   `json:"parse_special"` // default true
	WithPieces   bool    `json:"with_pieces"`
}

// piece is a token with its text: a string when the token's bytes are
// valid UTF-8, else the bytes (llama.cpp's shape).
type piece struct {
	ID    engine.Token `json:"id"`
	Piece any          `json:"piece"`
}

// detokenizeRequest is the body of POST /detokenize.
type detokenizeRequest struct {
	Tokens []int64 `json:"tokens"`
}

// tokenize is POST /tokenize: {tokens: [ids]} or, with_pieces,
// {tokens: [{id, piece}]}.
func (a *api) tokenize(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req tokenizeRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	toks, err := tokenizeContent(m, &req)
	if err != nil {
		return err
	}
	if !req.WithPieces {
		return wire.WriteJSON(ctx, map[string]any{"tokens": toks})
	}
	pieces := make([]piece, 0, len(toks))
	var buf []byte
	for _, t := range toks {
		buf = m.Text.AppendPiece(buf[:0], t, true)
		p := piece{ID: t, Piece: string(buf)}
		if !utf8.Valid(buf) {
			p.Piece = wire.ByteList(buf)
		}
		pieces = append(pieces, p)
	}
	return wire.WriteJSON(ctx, map[string]any{"tokens": pieces})
}

// tokenizeContent tokenizes /tokenize's content (never nil, so that no
// text gives []).
func tokenizeContent(m *task.Model, req *tokenizeRequest) ([]engine.Token, error) {
	if req.Content == nil {
		return nil, wire.BadParam("content", "content is required: the text to tokenize")
	}
	parse := req.ParseSpecial == nil || *req.ParseSpecial
	toks, err := m.Text.Tokenize(*req.Content, req.AddSpecial, parse)
	if err != nil {
		return nil, wire.BadParam("content", "cannot tokenize content: %v", err)
	}
	if toks == nil {
		toks = []engine.Token{}
	}
	return toks, nil
}

// detokenize is POST /detokenize: {content}, special tokens rendered
// as their text (llama.cpp's tokens_to_str).
func (a *api) detokenize(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req detokenizeRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	toks, err := detokenizeTokens(m, req.Tokens)
	if err != nil {
		return err
	}
	return wire.WriteJSON(ctx, map[string]string{"content": m.Text.Detokenize(toks, true)})
}

// detokenizeTokens checks ids against the vocabulary.
func detokenizeTokens(m *task.Model, ids []int64) ([]engine.Token, error) {
	toks := make([]engine.Token, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(m.Desc.Vocab) {
			return nil, wire.BadParam("tokens", "tokens[%d]: %d is not a token id of this model (vocabulary of %d)", i, id, m.Desc.Vocab)
		}
		toks[i] = engine.Token(id)
	}
	return toks, nil
}
