package openai

import (
	"context"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

// oaiEmbeddingRequest is POST /v1/embeddings. Every field OpenAI documents
// is honoured; embd_normalize is llama-server's extension of the same
// route. Vectors are unit length (L2), as OpenAI's are.
type oaiEmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
	EmbdNormalize  *int64          `json:"embd_normalize"`
}

type oaiEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float64 or a base64 string
}

type oaiEmbeddingResponse struct {
	Object string         `json:"object"`
	Data   []oaiEmbedding `json:"data"`
	Model  string         `json:"model"`
	Usage  oaiEmbedUsage  `json:"usage"`
}

type oaiEmbedUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func (a *api) embeddings(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req oaiEmbeddingRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	out, err := embedWhole(rctx, m, &req, a.classingOf(ctx))
	if err != nil {
		return err
	}
	return wire.WriteJSON(ctx, out)
}

// embedWhole reads an embedding request, embeds every input and answers
// with the vectors.
func embedWhole(ctx context.Context, m *task.Model, req *oaiEmbeddingRequest, cls classing) (*oaiEmbeddingResponse, error) {
	b64 := false
	if req.EncodingFormat != nil {
		switch *req.EncodingFormat {
		case "float":
		case "base64":
			b64 = true
		default:
			return nil, wire.BadParam("encoding_format", "encoding_format must be float or base64, got %q", *req.EncodingFormat)
		}
	}
	sp := task.EmbedRequest{Field: "input", Norm: task.NormL2}
	if req.Dimensions != nil {
		if *req.Dimensions < 1 {
			return nil, wire.BadParam("dimensions", "dimensions must be at least 1, got %d", *req.Dimensions)
		}
		sp.Dims = *req.Dimensions
	}
	var err error
	if sp.Norm, err = wire.EmbedNormParam(req.EmbdNormalize); err != nil {
		return nil, err
	}
	if sp.Inputs, err = wire.ParseEmbedInputs(req.Input, "input", wire.EmbedInputShapes{Tokens: true}, m.Desc.Vocab); err != nil {
		return nil, err
	}
	for i, in := range sp.Inputs {
		if !in.IsTokens && in.Text == "" {
			// OpenAI refuses an empty string rather than embed nothing.
			return nil, wire.BadParam("input", "input[%d] is an empty string", i)
		}
	}
	if err := sp.CheckEmbed(m); err != nil {
		return nil, wire.Convert(err)
	}
	class, err := cls.embed()
	if err != nil {
		return nil, err
	}
	res, err := task.Embed(ctx, m, class, &sp)
	if err != nil {
		return nil, wire.Convert(err)
	}
	out := &oaiEmbeddingResponse{Object: "list", Model: m.Name, Data: make([]oaiEmbedding, len(res.Vecs)),
		Usage: oaiEmbedUsage{PromptTokens: res.Tokens, TotalTokens: res.Tokens}}
	if req.Model != "" {
		out.Model = req.Model
	}
	for i, v := range res.Vecs {
		d := oaiEmbedding{Object: "embedding", Index: i}
		if b64 {
			d.Embedding = wire.Base64Floats(v)
		} else {
			d.Embedding = wire.Widen(v)
		}
		out.Data[i] = d
	}
	return out, nil
}
