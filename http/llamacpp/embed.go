package llamacpp

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

// embedRequest is llama-server's non-OpenAI /embedding(s): "input"
// (or "content") as tokenize_input_prompts reads it — a string, token ids,
// or an array mixing strings and token arrays — and embd_normalize (-1
// none, 0 max absolute, 1 taxicab, 2 euclidean, the default, p > 2 the
// p-norm).
type embedRequest struct {
	Input          json.RawMessage `json:"input"`
	Content        json.RawMessage `json:"content"`
	EmbdNormalize  *int64          `json:"embd_normalize"`
	EncodingFormat json.RawMessage `json:"encoding_format"`
}

type embedding struct {
	Index int `json:"index"`
	// One vector per token for a model without pooling; ours pool, so
	// there is one, nested as llama-server nests it.
	Embedding [][]float32 `json:"embedding"`
}

// embeddings is POST /embedding and /embeddings: one pooled vector per
// input, in input order.
func (a *api) embeddings(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req embedRequest
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
	if task.IsNull(raw) {
		field, raw = "content", req.Content
	}
	if task.IsNull(raw) {
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
	res, err := wire.RunEmbed(ctx, a.host, m, &sp)
	if err != nil {
		return err
	}
	out := make([]embedding, len(res.Vecs))
	for i, v := range res.Vecs {
		out[i] = embedding{Index: i, Embedding: [][]float32{v}}
	}
	return wire.WriteJSON(ctx, out)
}
