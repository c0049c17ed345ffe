package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"superfluid/app"
	"superfluid/synth"
)

// Reranking end to end: the real engine scoring with the synthetic
// reranker (qwen3, rank pooling, a cls.output head) behind a real socket,
// in llama-server's and Jina's shape.

func rerankModel(t testing.TB) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	if p, ok := modelMemo["rerank"]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "rerank.gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: "f16", Seed: 11, Arch: "qwen3", Pooling: "rank"}); err != nil {
		t.Fatal(err)
	}
	modelMemo["rerank"] = path
	return path
}

type rerankAnswer struct {
	Model   string `json:"model"`
	Results []struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
		Document       *struct {
			Text string `json:"text"`
		} `json:"document"`
	} `json:"results"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

func rerankPost(t *testing.T, url string, body map[string]any) rerankAnswer {
	t.Helper()
	status, raw := post(t, url, body)
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	var a rerankAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return a
}

func TestRerank(t *testing.T) {
	before := goroutineIDs()
	st := startStack(t, app.Options{ModelPath: rerankModel(t), Alias: "rerank"})
	docs := embedTexts(40)
	calls := embedCalls(t, st)
	all := rerankPost(t, st.URL()+"/v1/rerank", map[string]any{"model": "rerank", "query": "which fox reads the repository?", "documents": docs})
	if n := embedCalls(t, st) - calls; n >= len(docs) {
		t.Errorf("%d documents took %d engine calls: not batched", len(docs), n)
	}
	if len(all.Results) != len(docs) || all.Usage.PromptTokens == 0 || all.Model != "rerank" {
		t.Fatalf("answer %+v", all)
	}
	// One by one (each document its own request and engine call), the
	// scores are the batch's within float tolerance, and the batch's order
	// is the order of those lone scores.
	lone := make([]float64, len(docs))
	for i, d := range docs {
		a := rerankPost(t, st.URL()+"/rerank", map[string]any{"query": "which fox reads the repository?", "documents": []string{d}})
		lone[i] = a.Results[0].RelevanceScore
	}
	for k, r := range all.Results {
		if math.Abs(r.RelevanceScore-lone[r.Index]) > 1e-4 {
			t.Errorf("documents[%d]: batched %v, alone %v", r.Index, r.RelevanceScore, lone[r.Index])
		}
		if k > 0 && all.Results[k-1].RelevanceScore < r.RelevanceScore {
			t.Errorf("results %d and %d out of order", k-1, k)
		}
	}
	order := make([]int, len(docs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return lone[order[a]] > lone[order[b]] })
	for k := range order {
		// Near-ties may swap within the tolerance; distinct scores may not.
		if got := all.Results[k].Index; got != order[k] && math.Abs(lone[got]-lone[order[k]]) > 1e-4 {
			t.Errorf("rank %d: documents[%d], lone scores rank documents[%d]", k, got, order[k])
		}
	}
	distinct := map[float64]bool{}
	for _, s := range lone {
		distinct[s] = true
	}
	if len(distinct) < len(docs)/2 {
		t.Errorf("only %d distinct scores over %d documents: no order to test", len(distinct), len(docs))
	}

	// top_n and return_documents (Jina's {"text": …} documents too).
	objs := make([]map[string]string, len(docs))
	for i, d := range docs {
		objs[i] = map[string]string{"text": d}
	}
	top := rerankPost(t, st.URL()+"/v1/reranking", map[string]any{"query": "which fox reads the repository?", "documents": objs, "top_n": 3, "return_documents": true})
	if len(top.Results) != 3 {
		t.Fatalf("top_n 3: %d results", len(top.Results))
	}
	for k, r := range top.Results {
		if r.Index != all.Results[k].Index || r.Document == nil || r.Document.Text != docs[r.Index] {
			t.Errorf("top_n result %d: %+v, want documents[%d]", k, r, all.Results[k].Index)
		}
	}

	// Hostile bodies: a 400 in OpenAI's error shape naming the field, and
	// the server keeps serving.
	many := make([]string, 5000)
	for i := range many {
		many[i] = "d"
	}
	for _, c := range []struct {
		body  map[string]any
		param string
	}{
		{map[string]any{"query": "", "documents": []string{"a"}}, "query"},
		{map[string]any{"query": "q", "documents": many}, "documents"},
		{map[string]any{"query": "q", "documents": []string{strings.Repeat("fox ", 3000)}}, "documents"},
		{map[string]any{"query": "q", "documents": []any{map[string]int{"text": 3}}}, "documents"},
		{map[string]any{"query": "q", "documents": []string{"a"}, "top_n": 0}, "top_n"},
	} {
		status, raw := post(t, st.URL()+"/v1/rerank", c.body)
		var e struct {
			Error struct {
				Param   string `json:"param"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if status != 400 || json.Unmarshal(raw, &e) != nil || e.Error.Param != c.param || e.Error.Message == "" {
			t.Errorf("%.80s: %d %.300s, want a 400 naming %s", fmt.Sprint(c.body), status, raw, c.param)
		}
	}
	// A reranker computes no embeddings.
	if status, raw := post(t, st.URL()+"/v1/embeddings", map[string]any{"model": "rerank", "input": "a"}); status != 400 {
		t.Errorf("embeddings from a reranker: %d %s", status, raw)
	}
	if again := rerankPost(t, st.URL()+"/v1/rerank", map[string]any{"query": "q", "documents": []string{"a", "b"}}); len(again.Results) != 2 {
		t.Errorf("after the refusals: %+v", again)
	}
	st.Close()
	if leaked := leakedGoroutines(before); len(leaked) > 0 {
		t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

// A generation model refuses a rerank request.
func TestRerankGenerationModelRefused(t *testing.T) {
	st := startStack(t, app.Options{ModelPath: tinyModel(t)})
	if status, raw := post(t, st.URL()+"/v1/rerank", map[string]any{"query": "q", "documents": []string{"a"}}); status != 400 || !strings.Contains(string(raw), "not a reranking model") {
		t.Errorf("%d %s", status, raw)
	}
}
