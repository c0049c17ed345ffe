// Package rerank is the reranking API on the route seam: POST /rerank,
// /reranking, /v1/rerank and /v1/reranking, as llama-server mounts them,
// in the shape llama-server, Jina and Cohere clients send and read
// (query, documents as strings or {"text": …} objects, top_n,
// return_documents; results with index and relevance_score, best first,
// and usage), and Hugging Face TEI's (texts, return_text; a bare array of
// index and score), which llama-server also answers. It runs on a model
// loaded with rank pooling; the core (task.Rerank) pairs and scores.
package rerank

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// Routes are the reranking routes on h.
func Routes(h wire.Host) []wire.Route {
	a := &api{host: h}
	var routes []wire.Route
	for _, path := range []string{"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"} {
		routes = append(routes, wire.Route{Method: "POST", Path: path, API: wire.OpenAI, Handle: a.rerank})
	}
	return routes
}

type api struct{ host wire.Host }

// request is every shape's fields: Jina's and Cohere's documents, TEI's
// texts. Cohere's fields for structured documents and chunking are refused
// by name (unhonoured).
type request struct {
	Model           string            `json:"model"`
	Query           json.RawMessage   `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	Texts           []json.RawMessage `json:"texts"`
	TopN            *int              `json:"top_n"`
	ReturnDocuments *bool             `json:"return_documents"`
	ReturnText      *bool             `json:"return_text"`

	RankFields      json.RawMessage `json:"rank_fields"`
	MaxChunksPerDoc json.RawMessage `json:"max_chunks_per_doc"`
	MaxTokensPerDoc json.RawMessage `json:"max_tokens_per_doc"`
}

type document struct {
	Text string `json:"text"`
}

type result struct {
	Index          int       `json:"index"`
	RelevanceScore float64   `json:"relevance_score"`
	Document       *document `json:"document,omitempty"`
}

type usage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type response struct {
	Model   string   `json:"model"`
	Object  string   `json:"object"`
	Usage   usage    `json:"usage"`
	Results []result `json:"results"`
}

// teiResult is one entry of TEI's answer.
type teiResult struct {
	Index int     `json:"index"`
	Score float64 `json:"score"`
	Text  *string `json:"text,omitempty"`
}

func (a *api) rerank(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req request
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	sp, tei, err := read(&req)
	if err != nil {
		return err
	}
	if err := sp.CheckRerank(m); err != nil {
		return wire.Convert(err)
	}
	// Background unless the class header names another, as embeddings:
	// ranking a corpus never slows a person's completions.
	class, err := wire.Class(ctx, "", sched.Background)
	if err != nil {
		return err
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	res, err := task.Rerank(rctx, m, class, sp)
	if err != nil {
		return wire.Convert(err)
	}
	if tei {
		out := make([]teiResult, len(res.Results))
		for i, r := range res.Results {
			out[i] = teiResult{Index: r.Index, Score: r.Score}
			if req.ReturnText != nil && *req.ReturnText {
				out[i].Text = &sp.Documents[r.Index]
			}
		}
		return wire.WriteJSON(ctx, out)
	}
	out := response{Model: m.Name, Object: "list", Usage: usage{PromptTokens: res.Tokens, TotalTokens: res.Tokens},
		Results: make([]result, len(res.Results))}
	if req.Model != "" {
		out.Model = req.Model
	}
	for i, r := range res.Results {
		out.Results[i] = result{Index: r.Index, RelevanceScore: r.Score}
		if req.ReturnDocuments != nil && *req.ReturnDocuments {
			out.Results[i].Document = &document{Text: sp.Documents[r.Index]}
		}
	}
	return wire.WriteJSON(ctx, out)
}

// read turns a body into the core's request; tei says the body is TEI's
// (texts rather than documents).
func read(req *request) (sp *task.RerankRequest, tei bool, err error) {
	if err := wire.RefuseUnhonoured(
		wire.Unhonoured{Name: "rank_fields", Raw: req.RankFields, Neutral: wire.EmptyValue, Why: "documents are ranked as whole texts; send each as a string"},
		wire.Unhonoured{Name: "max_chunks_per_doc", Raw: req.MaxChunksPerDoc, Why: "documents are not chunked; a document longer than the model takes is refused"},
		wire.Unhonoured{Name: "max_tokens_per_doc", Raw: req.MaxTokensPerDoc, Why: "documents are not truncated; a document longer than the model takes is refused"},
	); err != nil {
		return nil, false, err
	}
	field, raw := "documents", req.Documents
	if req.Documents == nil && req.Texts != nil {
		field, raw, tei = "texts", req.Texts, true
	}
	if req.Documents != nil && req.Texts != nil {
		return nil, false, wire.BadParam("texts", "send documents or texts, not both")
	}
	sp = &task.RerankRequest{}
	q := bytes.TrimSpace(req.Query)
	if len(q) == 0 || q[0] != '"' {
		return nil, false, wire.BadParam("query", "query must be a string")
	}
	if err := json.Unmarshal(q, &sp.Query); err != nil {
		return nil, false, wire.BadParam("query", "query: %v", err)
	}
	if len(raw) > task.MaxEmbedInputs {
		return nil, false, wire.BadParam(field, "%s has %d entries; at most %d are ranked in one request", field, len(raw), task.MaxEmbedInputs)
	}
	sp.Documents = make([]string, len(raw))
	for i, d := range raw {
		if sp.Documents[i], err = documentText(d, field, i, !tei); err != nil {
			return nil, false, err
		}
	}
	if req.TopN != nil {
		if *req.TopN < 1 {
			return nil, false, wire.BadParam("top_n", "top_n must be at least 1, got %d", *req.TopN)
		}
		sp.TopN = *req.TopN
	}
	return sp, tei, nil
}

// documentText reads one document: a string, or (Jina, Cohere) an object
// whose text field holds it.
func documentText(raw json.RawMessage, field string, i int, objects bool) (string, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", wire.BadParam(field, "%s[%d]: %v", field, i, err)
		}
		return s, nil
	case len(raw) > 0 && raw[0] == '{' && objects:
		var d struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &d); err != nil || d.Text == nil {
			return "", wire.BadParam(field, `%s[%d] must be a string or an object with a "text" string`, field, i)
		}
		return *d.Text, nil
	}
	if objects {
		return "", wire.BadParam(field, `%s[%d] must be a string or an object with a "text" string`, field, i)
	}
	return "", wire.BadParam(field, "%s[%d] must be a string", field, i)
}
