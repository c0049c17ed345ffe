package cgo

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
	"superfluid/synth"
)

// embedModel writes (once) the tiny synthetic model pooling by pooling.
func embedModel(t testing.TB, pooling string) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := "pooling:" + pooling
	if p, ok := modelMemo[key]; ok {
		return p
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, fmt.Sprintf("embed-%s.gguf", pooling))
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "f16", Seed: 7, Pooling: pooling}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

func openEmbed(t testing.TB, pooling string, seqs, batch int) *Engine {
	t.Helper()
	e, err := Open(Options{ModelPath: embedModel(t, pooling), Ctx: batch, Lanes: 1, Seqs: seqs, Batch: batch, Threads: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func embedOne(t *testing.T, e *Engine, in []engine.Token) []float32 {
	t.Helper()
	v, err := e.Embed([][]engine.Token{in}, nil)
	if err != nil {
		t.Fatalf("embed: %v", err)
	}
	return v
}

// Several inputs in one call give each input's own vector: the sequences
// do not see each other, and a batch computes what single calls do.
func TestEmbedBatchMatchesSingles(t *testing.T) {
	for _, pooling := range []string{"mean", "cls", "last"} {
		t.Run(pooling, func(t *testing.T) {
			e := openEmbed(t, pooling, 8, 256)
			d := e.Descriptor()
			if d.Pooling.String() != pooling || e.EmbedDim() != d.Embd {
				t.Fatalf("descriptor pooling %v, dim %d (n_embd %d)", d.Pooling, e.EmbedDim(), d.Embd)
			}
			var inputs [][]engine.Token
			for i := range 6 {
				inputs = append(inputs, promptTokens(t, e, 3+7*i, fmt.Sprint("in", i)))
			}
			all, err := e.Embed(inputs, nil)
			if err != nil {
				t.Fatal(err)
			}
			dim := e.EmbedDim()
			if len(all) != len(inputs)*dim {
				t.Fatalf("%d floats for %d inputs of %d", len(all), len(inputs), dim)
			}
			for i, in := range inputs {
				one := embedOne(t, e, in)
				for j := range one {
					if d := math.Abs(float64(one[j] - all[i*dim+j])); d > 1e-5 || math.IsNaN(float64(one[j])) {
						t.Fatalf("input %d float %d: batch %g, alone %g", i, j, all[i*dim+j], one[j])
					}
				}
			}
			// Different inputs pool to different vectors, and the same
			// input to the same one call after call (the sequences are
			// empty again after each call).
			other := slices.Clone(inputs[1])
			slices.Reverse(other) // another first token, for cls
			a, b := embedOne(t, e, inputs[0]), embedOne(t, e, other)
			if fmt.Sprint(a) == fmt.Sprint(b) {
				t.Error("two inputs pooled to the same vector")
			}
			if again := embedOne(t, e, inputs[0]); fmt.Sprint(again) != fmt.Sprint(a) {
				t.Error("the same input embedded twice differs")
			}
		})
	}
}

// CLS pools the first token and LAST the last: inputs sharing the first
// token agree under CLS; under LAST, a prefix differs from the whole.
func TestEmbedPoolingPicksTheToken(t *testing.T) {
	cls := openEmbed(t, "cls", 4, 128)
	in := promptTokens(t, cls, 20, "pool")
	if a, b := embedOne(t, cls, in[:5]), embedOne(t, cls, in); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("cls: inputs with the same first token pooled differently (causal attention: the first token sees only itself)")
	}
	last := openEmbed(t, "last", 4, 128)
	if a, b := embedOne(t, last, in[:5]), embedOne(t, last, in); fmt.Sprint(a) == fmt.Sprint(b) {
		t.Error("last: a prefix pooled like the whole input")
	}
}

// Everything a request could send wrong is refused before llama.cpp sees
// it, and the engine keeps working.
func TestEmbedRefusesBadCalls(t *testing.T) {
	e := openEmbed(t, "mean", 4, 64)
	ok := promptTokens(t, e, 8, "ok")
	want := embedOne(t, e, ok)
	maxIn, maxTok := e.EmbedLimits()
	if maxIn != 4 || maxTok != 64 {
		t.Fatalf("limits %d inputs, %d tokens", maxIn, maxTok)
	}
	long := promptTokens(t, e, 65, "long")
	cases := map[string]struct {
		in   [][]engine.Token
		want error
	}{
		"no inputs":        {nil, engine.ErrInvalid},
		"empty input":      {[][]engine.Token{ok, {}}, engine.ErrInvalid},
		"negative token":   {[][]engine.Token{{1, -1}}, engine.ErrInvalid},
		"token past vocab": {[][]engine.Token{{engine.Token(e.Descriptor().Vocab)}}, engine.ErrInvalid},
		"huge token":       {[][]engine.Token{{math.MaxInt32}}, engine.ErrInvalid},
		"input too long":   {[][]engine.Token{long}, engine.ErrContext},
		"batch too big":    {[][]engine.Token{long[:40], long[:40]}, engine.ErrBatch},
		"too many inputs":  {[][]engine.Token{ok, ok, ok, ok, ok}, engine.ErrSeqRange},
	}
	for name, c := range cases {
		dst := []float32{42}
		got, err := e.Embed(c.in, dst)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		if len(got) != 1 || got[0] != 42 {
			t.Errorf("%s: dst changed to %d floats", name, len(got))
		}
	}
	if got := embedOne(t, e, ok); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Error("the engine embeds differently after refusals")
	}
}

// An exception inside the call is caught at the ABI; the next call works.
func TestEmbedExceptionIsCaught(t *testing.T) {
	e := openEmbed(t, "mean", 2, 64)
	in := promptTokens(t, e, 8, "boom")
	want := embedOne(t, e, in)
	e.injectEmbedException()
	if _, err := e.Embed([][]engine.Token{in}, nil); !errors.Is(err, engine.ErrException) {
		t.Fatalf("injected exception: %v", err)
	}
	if got := embedOne(t, e, in); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Error("after the exception the input embeds differently")
	}
}

// A generation model refuses to embed; an embedding model refuses to tick.
func TestEmbedAndGenerateRefuseEachOther(t *testing.T) {
	gen := openTest(t, 1)
	if gen.Descriptor().Pooling != engine.PoolingNone {
		t.Fatalf("generation model pooling %v", gen.Descriptor().Pooling)
	}
	if _, err := gen.Embed([][]engine.Token{{1, 2}}, nil); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("generation model embedded: %v", err)
	}
	emb := openEmbed(t, "mean", 2, 64)
	prompt := promptTokens(t, emb, 4, "gen")
	if _, err := runToEnd(emb, admitOne(emb, 1, prompt, nil, engine.Greedy(), 2)); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("embedding model ticked: %v", err)
	}
}

// The fake embedder refuses exactly what the native engine refuses, with
// the same status, so tests above cgo prove something about real calls.
func TestEmbedConformance(t *testing.T) {
	real := openEmbed(t, "mean", 4, 64)
	d := real.Descriptor()
	maxIn, maxTok := real.EmbedLimits()
	fake := enginetest.NewEmbedder(d.Vocab, maxIn, maxTok, real.EmbedDim())
	ok := promptTokens(t, real, 8, "ok")
	long := promptTokens(t, real, 65, "long")
	calls := map[string][][]engine.Token{
		"fine":            {ok, ok[:3]},
		"no inputs":       nil,
		"empty input":     {ok, {}},
		"negative token":  {{1, -1}},
		"token past":      {{engine.Token(d.Vocab)}},
		"input too long":  {long},
		"batch too big":   {long[:40], long[:40]},
		"too many inputs": {ok, ok, ok, ok, ok},
		"whole batch":     {long[:32], long[:32]},
	}
	for name, in := range calls {
		_, rerr := real.Embed(in, nil)
		fv, ferr := fake.Embed(in, nil)
		var re, fe *engine.Error
		errors.As(rerr, &re)
		errors.As(ferr, &fe)
		if (re == nil) != (fe == nil) || re != nil && re.Status != fe.Status {
			t.Errorf("%s: engine %v, fake %v", name, rerr, ferr)
		}
		if ferr == nil && len(fv) != len(in)*real.EmbedDim() {
			t.Errorf("%s: the fake gave %d floats", name, len(fv))
		}
	}
}
