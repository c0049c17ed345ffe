package task

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"superfluid/engine"
	"superfluid/sched"
)

// What the rerank APIs (llama-server's /rerank, Jina's and Cohere's
// /v1/rerank) share: each document paired with the query as llama-server
// pairs them, every pair scored by the reranker in one call to the
// embedding runner (so the pairs share engine calls as embedding inputs
// do), the scores sorted best first and cut to top_n.

// RerankRequest is a rerank request, whichever API sent it.
type RerankRequest struct {
	Query     string
	Documents []string
	// TopN keeps the best TopN results; 0 keeps them all.
	TopN int
}

// RerankResult is one document's score; Index is its place in the request.
type RerankResult struct {
	Index int
	Score float64
}

// Ranking is the request's results, best first, and what they took.
type Ranking struct {
	Results []RerankResult
	Tokens  int // tokens scored, all pairs together
	Took    time.Duration
}

// NotReranker is the refusal of a rerank request to a model without rank
// pooling.
func NotReranker(m *Model) *Error {
	return WrongModelError("model %q is not a reranking model: it needs pooling type rank and a classifier head (its pooling is %s)", m.Name, m.Desc.Pooling)
}

// CheckRerank refuses a request m cannot answer, before any tokenizing.
func (r *RerankRequest) CheckRerank(m *Model) error {
	if m.Embed == nil || m.Desc.Pooling != engine.PoolingRank {
		return NotReranker(m)
	}
	if r.Query == "" {
		return BadParam("query", "query must be a non-empty string")
	}
	if len(r.Documents) == 0 {
		return BadParam("documents", "documents must be a non-empty array")
	}
	if len(r.Documents) > MaxEmbedInputs {
		return BadParam("documents", "documents has %d entries; at most %d are ranked in one request", len(r.Documents), MaxEmbedInputs)
	}
	if r.TopN < 0 {
		return BadParam("top_n", "top_n must be at least 1, got %d", r.TopN)
	}
	return nil
}

// Rerank scores every document of r against its query in class c; r has
// passed CheckRerank.
func Rerank(ctx context.Context, m *Model, c sched.Class, r *RerankRequest) (Ranking, error) {
	start := time.Now()
	pairs := make([][]engine.Token, len(r.Documents))
	total := 0
	limit := m.Embed.MaxInputTokens()
	for i, doc := range r.Documents {
		toks, err := rerankPair(m, r.Query, doc, i)
		if err != nil {
			return Ranking{}, err
		}
		if len(toks) > limit {
			return Ranking{}, &Error{Kind: ContextExceeded, Param: "documents", Code: "context_length_exceeded",
				Msg: fmt.Sprintf("documents[%d] with the query is %d tokens; a pair may have at most %d (the context of one reranking call)", i, len(toks), limit)}
		}
		pairs[i] = toks
		total += len(toks)
	}
	vecs, err := m.Embed.Embed(ctx, pairs, c)
	if err != nil {
		return Ranking{}, embedError("documents", err)
	}
	res := make([]RerankResult, len(vecs))
	for i, v := range vecs {
		// The first label's score is the relevance (llama-server's embd[0]).
		s := float64(v[0])
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return Ranking{}, InternalError("documents[%d]: the model computed a score that is not a finite number", i)
		}
		res[i] = RerankResult{Index: i, Score: s}
	}
	SortRanking(res)
	if r.TopN > 0 && r.TopN < len(res) {
		res = res[:r.TopN]
	}
	return Ranking{Results: res, Tokens: total, Took: time.Since(start)}, nil
}

// SortRanking orders results best first; equal scores keep the documents'
// order.
func SortRanking(res []RerankResult) {
	slices.SortStableFunc(res, func(a, b RerankResult) int { return cmp.Compare(b.Score, a.Score) })
}

// rerankPair tokenizes one query-document pair as llama-server's
// format_prompt_rerank does: through the model's rerank template when it
// has one ({query} and {document} replaced, special tokens parsed), else
// BOS, query, EOS, SEP, document, EOS as the vocabulary adds them (a
// BERT-style cross-encoder's pair). The template's placeholders are
// replaced in one pass, so a query that holds the text "{document}" stays
// as it was sent.
func rerankPair(m *Model, query, doc string, i int) ([]engine.Token, error) {
	d := m.Desc
	if n := len(query) + len(doc) + len(d.RerankTemplate); n > MaxPromptBytes(d) {
		return nil, CheckPromptBytes(d, "documents", n)
	}
	if d.RerankTemplate != "" {
		text := strings.NewReplacer("{query}", query, "{document}", doc).Replace(d.RerankTemplate)
		return rerankTokenize(m, text, true, i)
	}
	q, err := rerankTokenize(m, query, false, i)
	if err != nil {
		return nil, err
	}
	dt, err := rerankTokenize(m, doc, false, i)
	if err != nil {
		return nil, err
	}
	eos := d.EOS
	if eos < 0 {
		eos = d.SEP
	}
	out := make([]engine.Token, 0, len(q)+len(dt)+5)
	if d.AddBOS && d.BOS >= 0 {
		out = append(out, d.BOS)
	}
	out = append(out, q...)
	if d.AddEOS && eos >= 0 {
		out = append(out, eos)
	}
	if d.AddSEP && d.SEP >= 0 {
		out = append(out, d.SEP)
	}
	out = append(out, dt...)
	if d.AddEOS && eos >= 0 {
		out = append(out, eos)
	}
	return out, nil
}

func rerankTokenize(m *Model, text string, parseSpecial bool, i int) ([]engine.Token, error) {
	toks, err := m.Text.Tokenize(text, false, parseSpecial)
	if errors.Is(err, engine.ErrClosed) {
		return nil, ErrShutDown
	}
	if err != nil {
		return nil, BadParam("documents", "cannot tokenize documents[%d] with the query: %v", i, err)
	}
	return toks, nil
}
