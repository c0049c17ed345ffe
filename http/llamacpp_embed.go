package http

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

func llamaEmbedRoutes() map[string]route {
	r := route{method: "POST", kind: wire.Llama, handler: (*Server).llamaEmbeddings, embeds: true}
	return map[string]route{"/embedding": r, "/embeddings": r}
}

// llamaEmbedRequest is llama-server's non-OpenAI /embedding(s): "input"
// (or "content") as tokenize_input_prompts reads it — a string, token ids,
// or an array mixing strings and token arrays — and embd_normalize (-1
// none, 0 max absolute, 1 taxicab, 2 euclidean, the default, p > 2 the
// p-norm).
type llamaEmbedRequest struct {
	Input          json.RawMessage `json:"input"`
	Content        json.RawMessage `json:"content"`
	EmbdNormalize  *int64          `json:"embd_normalize"`
	EncodingFormat json.RawMessage `json:"encoding_format"`
}

type llamaEmbedding struct {
	Index int `json:"index"`
	// One vector per token for a model without pooling; ours pool, so
	// there is one, nested as llama-server nests it.
	Embedding [][]float32 `json:"embedding"`
}

func (s *Server) llamaEmbeddings(ctx *fasthttp.RequestCtx, m *Model) error {
	var req llamaEmbedRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	// llama-server checks encoding_format here but writes floats whatever
	// it says; base64 would not be honoured.
	if err := wire.RefuseUnhonoured(wire.Unhonoured{Name: "encoding_format", Raw: req.EncodingFormat, Neutral: wire.StringIn("float"),
		Why: "this route answers floats; /v1/embeddings answers base64"}); err != nil {
		return err
	}
	field, raw := "input", req.Input
	if isAbsent(raw) {
		field, raw = "content", req.Content
	}
	if isAbsent(raw) {
		return wire.BadRequest(`"input" or "content" must be provided`)
	}
	norm, err := wire.EmbedNormParam(req.EmbdNormalize)
	if err != nil {
		return err
	}
	sp := task.EmbedRequest{Field: field, Norm: norm}
	if sp.Inputs, err = wire.ParseEmbedInputs(raw, field, wire.EmbedInputShapes{Tokens: true, Mixed: true}, m.Desc.Vocab); err != nil {
		return err
	}
	res, err := wire.RunEmbed(ctx, s.host(), &m.Model, &sp)
	if err != nil {
		return err
	}
	out := make([]llamaEmbedding, len(res.Vecs))
	for i, v := range res.Vecs {
		out[i] = llamaEmbedding{Index: i, Embedding: [][]float32{v}}
	}
	return wire.WriteJSON(ctx, out)
}

func isAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
