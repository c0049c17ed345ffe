package http

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

func ollamaEmbedRoutes() map[string]route {
	return map[string]route{
		"/api/embed":      {method: "POST", kind: wire.Ollama, handler: (*Server).ollamaEmbed, embeds: true},
		"/api/embeddings": {method: "POST", kind: wire.Ollama, handler: (*Server).ollamaEmbeddings, embeds: true},
	}
}

// ollamaEmbedRequest is POST /api/embed (api.EmbedRequest, v0.24.0).
type ollamaEmbedRequest struct {
	Model      string                     `json:"model"`
	Input      json.RawMessage            `json:"input"`
	Truncate   *bool                      `json:"truncate"`
	Dimensions int                        `json:"dimensions"`
	KeepAlive  json.RawMessage            `json:"keep_alive"`
	Options    map[string]json.RawMessage `json:"options"`
}

// ollamaEmbeddingRequest is the older POST /api/embeddings.
type ollamaEmbeddingRequest struct {
	Model     string                     `json:"model"`
	Prompt    *string                    `json:"prompt"`
	KeepAlive json.RawMessage            `json:"keep_alive"`
	Options   map[string]json.RawMessage `json:"options"`
}

// ollamaEmbedOptions checks keep_alive and options as Ollama types them.
// Sampling options do not change an embedding and are ignored; num_ctx
// bounds an input's tokens (Ollama truncates to it), returned as the limit.
func ollamaEmbedOptions(keepAlive json.RawMessage, options map[string]json.RawMessage) (int, error) {
	if err := checkKeepAlive(keepAlive); err != nil {
		return 0, err
	}
	o, err := parseOllamaOptions(options)
	if err != nil {
		return 0, err
	}
	if o.NumCtx != nil && *o.NumCtx > 0 {
		return *o.NumCtx, nil
	}
	return 0, nil
}

// ollamaEmbed serves /api/embed: a string or an array of strings,
// truncated to fit unless truncate is false, each vector L2-normalized
// (and cut to dimensions, then normalized again), as Ollama's EmbedHandler
// does. No input at all is an empty list, as in Ollama.
func (s *Server) ollamaEmbed(ctx *fasthttp.RequestCtx, m *Model) error {
	var req ollamaEmbedRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	if err := ollamaCheckModel(req.Model); err != nil {
		return err
	}
	limit, err := ollamaEmbedOptions(req.KeepAlive, req.Options)
	if err != nil {
		return err
	}
	if req.Dimensions < 0 {
		return wire.BadParam("dimensions", "dimensions must not be negative, got %d", req.Dimensions)
	}
	sp := task.EmbedRequest{Field: "input", Truncate: req.Truncate == nil || *req.Truncate, Limit: limit, Dims: req.Dimensions, Norm: task.NormL2}
	if string(req.Input) != `""` && len(req.Input) > 0 && string(req.Input) != "null" {
		if sp.Inputs, err = wire.ParseEmbedInputs(req.Input, "input", wire.EmbedInputShapes{}, m.Desc.Vocab); err != nil {
			return err
		}
	}
	out := map[string]any{"model": req.Model, "embeddings": [][]float32{}}
	if len(sp.Inputs) > 0 {
		res, err := wire.RunEmbed(ctx, s.host(), &m.Model, &sp)
		if err != nil {
			return err
		}
		out["embeddings"] = res.Vecs
		out["total_duration"] = res.Took.Nanoseconds()
		out["load_duration"] = 0 // the model is loaded before the server serves
		out["prompt_eval_count"] = res.Tokens
	}
	return wire.WriteJSON(ctx, out)
}

// ollamaEmbeddings serves the older /api/embeddings: one prompt, one
// vector, not normalized — Ollama's EmbeddingsHandler returns the runner's
// vector as it is — and never truncated (its runner refuses a prompt too
// long). An empty prompt is an empty vector (Ollama loads the model).
func (s *Server) ollamaEmbeddings(ctx *fasthttp.RequestCtx, m *Model) error {
	var req ollamaEmbeddingRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	if err := ollamaCheckModel(req.Model); err != nil {
		return err
	}
	if _, err := ollamaEmbedOptions(req.KeepAlive, req.Options); err != nil {
		return err
	}
	if req.Prompt == nil || *req.Prompt == "" {
		return wire.WriteJSON(ctx, map[string]any{"embedding": []float32{}})
	}
	sp := task.EmbedRequest{Field: "prompt", Inputs: []task.EmbedInput{{Text: *req.Prompt}}, Norm: task.NormNone}
	res, err := wire.RunEmbed(ctx, s.host(), &m.Model, &sp)
	if err != nil {
		return err
	}
	return wire.WriteJSON(ctx, map[string]any{"embedding": wire.Widen(res.Vecs[0])})
}
