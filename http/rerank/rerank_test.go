package rerank

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"superfluid/embed"
	"superfluid/engine"
	"superfluid/engine/enginetest"
	"superfluid/http/wire"
	"superfluid/http/wire/wiretest"
	"superfluid/task"
	"superfluid/task/tasktest"
)

const template = "<|im_start|>user\nq: {query}\nd: {document}<|im_end|>\n"

// reranker is the ChatML test model as a reranker over the fake embedding
// engine (two labels, small micro-batches so that a request spans calls),
// and that engine, which scores a pair alone.
func reranker(t *testing.T) (*task.Model, *enginetest.Embedder) {
	t.Helper()
	m := tasktest.ChatMLModel(t, 4096)
	d := *m.Desc
	d.Pooling, d.RerankTemplate = engine.PoolingRank, template
	m.Desc, m.Sched = &d, nil
	fake := enginetest.NewEmbedder(d.Vocab, 3, 256, 2)
	r, err := embed.New(fake, embed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	m.Embed = r
	return m, enginetest.NewEmbedder(d.Vocab, 3, 256, 2)
}

// lone is a pair's score scored by itself, as one call of its own.
func lone(t *testing.T, e *enginetest.Embedder, query, doc string) float64 {
	t.Helper()
	text := strings.NewReplacer("{query}", query, "{document}", doc).Replace(template)
	toks, _ := tasktest.ChatMLText{}.Tokenize(text, false, true)
	v, err := e.Embed([][]engine.Token{toks}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return float64(v[0])
}

func call(t *testing.T, m *task.Model, body string) ([]byte, error) {
	t.Helper()
	ctx := tasktest.RequestCtx([]byte(body))
	err := (&api{host: wiretest.Host{}}).rerank(ctx, m)
	return ctx.Response.Body(), err
}

func TestRerankOrdersByTheModelsScores(t *testing.T) {
	m, alone := reranker(t)
	docs := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"}
	raw, _ := json.Marshal(docs)
	body, err := call(t, m, fmt.Sprintf(`{"model":"r","query":"which letter?","documents":%s,"return_documents":true}`, raw))
	if err != nil {
		t.Fatal(err)
	}
	var got response
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "list" || got.Model != "r" || len(got.Results) != len(docs) || got.Usage.PromptTokens == 0 {
		t.Fatalf("response %s", body)
	}
	for i, r := range got.Results {
		want := lone(t, alone, "which letter?", docs[r.Index])
		// The batch ran the pairs three to a call; each equals its lone run.
		if r.RelevanceScore != float64(float32(want)) {
			t.Errorf("documents[%d]: batched score %v, alone %v", r.Index, r.RelevanceScore, want)
		}
		if r.Document == nil || r.Document.Text != docs[r.Index] {
			t.Errorf("result %d: document %+v, want %q", i, r.Document, docs[r.Index])
		}
		if i > 0 && got.Results[i-1].RelevanceScore < r.RelevanceScore {
			t.Errorf("results not best first: %s", body)
		}
	}
	seen := map[int]bool{}
	for _, r := range got.Results {
		seen[r.Index] = true
	}
	if len(seen) != len(docs) {
		t.Errorf("indices %v do not cover the documents", seen)
	}
}

func TestRerankTopNAndShapes(t *testing.T) {
	m, _ := reranker(t)
	full, err := call(t, m, `{"query":"q","documents":["a","b",{"text":"c"},"d"]}`)
	if err != nil {
		t.Fatal(err)
	}
	var all response
	_ = json.Unmarshal(full, &all)
	top, err := call(t, m, `{"query":"q","documents":["a","b",{"text":"c"},"d"],"top_n":2}`)
	if err != nil {
		t.Fatal(err)
	}
	var two response
	_ = json.Unmarshal(top, &two)
	if len(two.Results) != 2 || !slices.Equal(two.Results, all.Results[:2]) {
		t.Errorf("top_n 2: %s, of all %s", top, full)
	}
	if two.Results[0].Document != nil {
		t.Errorf("a document returned unasked: %s", top)
	}
	// top_n past the documents keeps them all.
	if body, err := call(t, m, `{"query":"q","documents":["a","b"],"top_n":9}`); err != nil || strings.Count(string(body), "relevance_score") != 2 {
		t.Errorf("top_n 9 over 2 documents: %s %v", body, err)
	}
	// TEI: texts in, a bare array of index and score out.
	body, err := call(t, m, `{"query":"q","texts":["a","b",{"text":"c"}]}`)
	tasktest.CheckRefusal(t, err)
	body, err = call(t, m, `{"query":"q","texts":["a","b","c"],"return_text":true}`)
	if err != nil {
		t.Fatal(err)
	}
	var tei []teiResult
	if json.Unmarshal(body, &tei) != nil || len(tei) != 3 || tei[0].Text == nil {
		t.Errorf("TEI answer %s", body)
	}
}

// Every refusal is a 400 in OpenAI's shape naming the field, before the
// engine runs.
func TestRerankRefusals(t *testing.T) {
	m, _ := reranker(t)
	many := `"d"` + strings.Repeat(`,"d"`, task.MaxEmbedInputs)
	huge := strings.Repeat("x", task.MaxPromptBytes(m.Desc))
	for _, c := range []struct{ body, param string }{
		{`{"query":"","documents":["a"]}`, "query"},
		{`{"documents":["a"]}`, "query"},
		{`{"query":7,"documents":["a"]}`, "query"},
		{`{"query":"q"}`, "documents"},
		{`{"query":"q","documents":[]}`, "documents"},
		{`{"query":"q","documents":[7]}`, "documents"},
		{`{"query":"q","documents":[{"title":"x"}]}`, "documents"},
		{`{"query":"q","documents":[` + many + `]}`, "documents"},
		{`{"query":"q","documents":["` + huge + `"]}`, "documents"},
		{`{"query":"q","documents":["` + strings.Repeat("y", 300) + `"]}`, "documents"}, // past one call's 256 tokens
		{`{"query":"q","documents":["a"],"top_n":0}`, "top_n"},
		{`{"query":"q","documents":["a"],"top_n":-3}`, "top_n"},
		{`{"query":"q","documents":["a"],"rank_fields":["title"]}`, "rank_fields"},
		{`{"query":"q","documents":["a"],"max_chunks_per_doc":4}`, "max_chunks_per_doc"},
		{`{"query":"q","documents":["a"],"texts":["b"]}`, "texts"},
	} {
		_, err := call(t, m, c.body)
		var we *wire.Error
		if err == nil || !errors.As(err, &we) || we.Status != 400 || we.Param != c.param {
			short := c.body[:min(len(c.body), 80)]
			t.Errorf("%s: %v (%+v), want a 400 naming %s", short, err, we, c.param)
		}
	}
	// Numbers that fit no int are a decoding 400.
	_, err := call(t, m, `{"query":"q","documents":["a"],"top_n":1e400}`)
	tasktest.CheckRefusal(t, err)
	// A generation model, and an embedding model without rank pooling.
	gen := tasktest.ChatMLModel(t, 4096)
	_, err = call(t, gen, `{"query":"q","documents":["a"]}`)
	tasktest.CheckRefusal(t, err)
	emb := *m
	d := *m.Desc
	d.Pooling = engine.PoolingMean
	emb.Desc = &d
	_, err = call(t, &emb, `{"query":"q","documents":["a"]}`)
	tasktest.CheckRefusal(t, err)
}

// A query holding the text "{document}" is not a second placeholder.
func TestRerankPlaceholdersReplacedOnce(t *testing.T) {
	m, alone := reranker(t)
	body, err := call(t, m, `{"query":"{document}","documents":["x"]}`)
	if err != nil {
		t.Fatal(err)
	}
	var got response
	_ = json.Unmarshal(body, &got)
	if want := float64(float32(lone(t, alone, "{document}", "x"))); got.Results[0].RelevanceScore != want {
		t.Errorf("score %v, want %v (the query's text kept)", got.Results[0].RelevanceScore, want)
	}
}
