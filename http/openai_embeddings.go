package http

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

func openaiEmbeddingRoutes() map[string]route {
	return map[string]route{
		"/v1/embeddings": {method: "POST", kind: wire.OpenAI, handler: (*Server).openaiEmbeddings, embeds: true},
	}
}

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

func (s *Server) openaiEmbeddings(ctx *fasthttp.RequestCtx, m *Model) error {
	var req oaiEmbeddingRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	b64 := false
	if req.EncodingFormat != nil {
		switch *req.EncodingFormat {
		case "float":
		case "base64":
			b64 = true
		default:
			return wire.BadParam("encoding_format", "encoding_format must be float or base64, got %q", *req.EncodingFormat)
		}
	}
	sp := task.EmbedRequest{Field: "input", Norm: task.NormL2}
	if req.Dimensions != nil {
		if *req.Dimensions < 1 {
			return wire.BadParam("dimensions", "dimensions must be at least 1, got %d", *req.Dimensions)
		}
		sp.Dims = *req.Dimensions
	}
	var err error
	if sp.Norm, err = wire.EmbedNormParam(req.EmbdNormalize); err != nil {
		return err
	}
	if sp.Inputs, err = wire.ParseEmbedInputs(req.Input, "input", wire.EmbedInputShapes{Tokens: true}, m.Desc.Vocab); err != nil {
		return err
	}
	for i, in := range sp.Inputs {
		if !in.IsTokens && in.Text == "" {
			// OpenAI refuses an empty string rather than embed nothing.
			return wire.BadParam("input", "input[%d] is an empty string", i)
		}
	}
	res, err := wire.RunEmbed(ctx, s.host(), &m.Model, &sp)
	if err != nil {
		return err
	}
	out := oaiEmbeddingResponse{Object: "list", Model: m.Name, Data: make([]oaiEmbedding, len(res.Vecs)),
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
	return wire.WriteJSON(ctx, out)
}
