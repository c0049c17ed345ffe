package cgo

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/synth"
)

// rerankModel writes (once) the tiny synthetic reranker: qwen3 with rank
// pooling and a two-label cls.output head.
func rerankModel(t testing.TB) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	if p, ok := modelMemo["rerank"]; ok {
		return p
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "rerank.gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: 7, Arch: "qwen3", Pooling: "rank"}); err != nil {
		t.Fatal(err)
	}
	modelMemo["rerank"] = path
	return path
}

// The reranker opens with rank pooling and scores each pair with its two
// labels' softmax; pairs batched score as they do alone, and the scores
// differ between documents (an order the model computes).
func TestRerankScoresBatchMatchesSingles(t *testing.T) {
	e, err := Open(Options{ModelPath: rerankModel(t), Ctx: 512, Lanes: 1, Seqs: 8, Batch: 512, Threads: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer e.Close()
	d := e.Descriptor()
	if d.Pooling != engine.PoolingRank || e.EmbedDim() != len(synth.RerankLabels) || d.RerankTemplate != synth.RerankTemplate {
		t.Fatalf("pooling %v, dim %d, template %q", d.Pooling, e.EmbedDim(), d.RerankTemplate)
	}
	var pairs [][]engine.Token
	for i := range 6 {
		text := strings.NewReplacer("{query}", "where is the fox", "{document}", fmt.Sprintf("document %d says %s", i, strings.Repeat("fox ", i))).
			Replace(d.RerankTemplate)
		toks, err := e.Tokenize(text, false, true)
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, toks)
	}
	all, err := e.Embed(pairs, nil)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[float32]bool{}
	for i, p := range pairs {
		one, err := e.Embed([][]engine.Token{p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := all[2*i : 2*i+2]
		for j := range one {
			if math.Abs(float64(got[j]-one[j])) > 1e-4 {
				t.Errorf("pair %d label %d: batched %v, alone %v", i, j, got[j], one[j])
			}
		}
		if s := got[0] + got[1]; math.Abs(float64(s)-1) > 1e-4 || got[0] <= 0 || got[0] >= 1 {
			t.Errorf("pair %d: labels %v are not a softmax", i, got)
		}
		distinct[got[0]] = true
	}
	if len(distinct) < len(pairs) {
		t.Errorf("scores %v: documents share scores, no order to test", all)
	}
}
