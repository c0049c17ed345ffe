package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"

	"superfluid/app"
	"superfluid/synth"
)

// Embeddings end to end: the real engine pooling a synthetic embedding
// model of each pooling type, behind a real socket, through the official
// clients (openai-go, Ollama's api package) and raw llama.cpp bodies.

// embedModel writes (once) the tiny synthetic model as an embedding model.
func embedModel(t testing.TB, pooling string) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := "embed|" + pooling
	if p, ok := modelMemo[key]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "embed-"+pooling+".gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: "f16", Seed: 11, Pooling: pooling}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

func embedTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("document %d: the %s fox reads line %d of the repository", i, []string{"quick", "lazy", "brown"}[i%3], i*7)
	}
	return out
}

func norm2(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// embedCalls reads superfluid_embed_calls_total from /metrics.
func embedCalls(t *testing.T, st *app.Stack) int {
	t.Helper()
	resp, err := http.Get(st.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^superfluid_embed_calls_total (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no superfluid_embed_calls_total in /metrics:\n%s", b)
	}
	n, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func TestEmbeddings(t *testing.T) {
	for _, pooling := range []string{"mean", "cls", "last"} {
		t.Run(pooling, func(t *testing.T) { testEmbeddings(t, pooling) })
	}
}

func testEmbeddings(t *testing.T, pooling string) {
	before := goroutineIDs()
	st := startStack(t, app.Options{ModelPath: embedModel(t, pooling), Alias: "embed"})
	ctx := context.Background()
	oc := openaiClient(st)
	texts := embedTexts(64)

	// float and base64 decode to the same float64s, bit for bit.
	params := openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts[:4]},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat}
	floats, err := oc.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	b64, err := oc.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	dim := st.Engine.EmbedDim()
	if len(floats.Data) != 4 || len(b64.Data) != 4 || floats.Usage.PromptTokens == 0 {
		t.Fatalf("float %d vectors, base64 %d, usage %+v", len(floats.Data), len(b64.Data), floats.Usage)
	}
	for i := range floats.Data {
		f, g := floats.Data[i].Embedding, b64.Data[i].Embedding
		if len(f) != dim || len(g) != dim {
			t.Fatalf("input %d: %d and %d values, want %d", i, len(f), len(g), dim)
		}
		for k := range f {
			if math.Float64bits(f[k]) != math.Float64bits(g[k]) {
				t.Fatalf("input %d value %d: float %v, base64 %v", i, k, f[k], g[k])
			}
		}
		if n := norm2(f); math.Abs(n-1) > 1e-6 {
			t.Errorf("input %d: norm %g", i, n)
		}
	}
	if pooling != "cls" && fmt.Sprint(floats.Data[0].Embedding) == fmt.Sprint(floats.Data[1].Embedding) {
		t.Error("two different inputs embedded alike")
	}

	// dimensions: unit length again, the direction of the full vector's
	// first values.
	params = openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(texts[0])},
		Dimensions: openai.Int(int64(dim / 2))}
	cut, err := oc.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	full := floats.Data[0].Embedding
	c := cut.Data[0].Embedding
	if len(c) != dim/2 || math.Abs(norm2(c)-1) > 1e-6 {
		t.Fatalf("dimensions %d: %d values, norm %g", dim/2, len(c), norm2(c))
	}
	head := norm2(full[:dim/2])
	for k := range c {
		if math.Abs(c[k]-full[k]/head) > 1e-6 {
			t.Fatalf("dimensions: value %d is %g, the full vector's direction says %g", k, c[k], full[k]/head)
		}
	}

	// A batch of 64 inputs gives what 64 single requests give, in fewer
	// engine calls than inputs.
	calls := embedCalls(t, st)
	batch, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	if err != nil {
		t.Fatal(err)
	}
	batchCalls := embedCalls(t, st) - calls
	t.Logf("64 inputs, %d engine calls", batchCalls)
	if batchCalls < 1 || batchCalls > 64/8 {
		t.Errorf("64 inputs ran in %d engine calls", batchCalls)
	}
	for i, text := range texts {
		one, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}})
		if err != nil {
			t.Fatal(err)
		}
		for k, x := range one.Data[0].Embedding {
			if d := math.Abs(x - batch.Data[i].Embedding[k]); d > 1e-5 {
				t.Fatalf("input %d value %d: alone %g, in the batch %g", i, k, x, batch.Data[i].Embedding[k])
			}
		}
	}

	// Ollama's client: /api/embed normalizes and matches OpenAI's vectors;
	// the older /api/embeddings returns the raw vector, whose direction is
	// the same.
	olc := ollamaClient(t, st)
	er, err := olc.Embed(ctx, &api.EmbedRequest{Model: "embed", Input: texts[:2]})
	if err != nil {
		t.Fatal(err)
	}
	if len(er.Embeddings) != 2 || er.PromptEvalCount == 0 {
		t.Fatalf("ollama embed: %d vectors, %d tokens", len(er.Embeddings), er.PromptEvalCount)
	}
	for k, x := range er.Embeddings[0] {
		if math.Abs(float64(x)-floats.Data[0].Embedding[k]) > 1e-6 {
			t.Fatalf("ollama embed value %d: %g, openai %g", k, x, floats.Data[0].Embedding[k])
		}
	}
	legacy, err := olc.Embeddings(ctx, &api.EmbeddingRequest{Model: "embed", Prompt: texts[0]})
	if err != nil {
		t.Fatal(err)
	}
	raw := norm2(legacy.Embedding)
	if len(legacy.Embedding) != dim || raw == 0 {
		t.Fatalf("ollama embeddings: %d values, norm %g", len(legacy.Embedding), raw)
	}
	for k, x := range legacy.Embedding {
		if math.Abs(x/raw-full[k]) > 1e-5 {
			t.Fatalf("ollama embeddings value %d: %g/%g, openai %g", k, x, raw, full[k])
		}
	}
	// Truncation: Ollama's default cuts a long input to what fits; false refuses it.
	long := strings.Repeat("all work and no play ", 400)
	if r, err := olc.Embed(ctx, &api.EmbedRequest{Model: "embed", Input: long}); err != nil || r.PromptEvalCount != st.Model.Embed.MaxInputTokens() {
		t.Errorf("truncated long input: %v, %+v", err, r)
	}
	no := false
	var se api.StatusError
	if _, err := olc.Embed(ctx, &api.EmbedRequest{Model: "embed", Input: long, Truncate: &no}); !errors.As(err, &se) || se.StatusCode != 400 {
		t.Errorf("long input, truncate false: %v", err)
	}

	// llama.cpp's own shape, and its embd_normalize.
	for _, path := range []string{"/embedding", "/embeddings"} {
		var out []struct {
			Index     int         `json:"index"`
			Embedding [][]float64 `json:"embedding"`
		}
		status, body := postEmbed(t, st.URL()+path, `{"content":`+strconv.Quote(texts[0])+`}`, &out)
		if status != 200 || len(out) != 1 || len(out[0].Embedding) != 1 {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		for k, x := range out[0].Embedding[0] {
			if math.Abs(x-full[k]) > 1e-6 {
				t.Fatalf("%s value %d: %g, openai %g", path, k, x, full[k])
			}
		}
	}
	var rawOut []struct{ Embedding [][]float64 }
	if status, body := postEmbed(t, st.URL()+"/embedding", `{"input":`+strconv.Quote(texts[0])+`,"embd_normalize":-1}`, &rawOut); status != 200 || math.Abs(norm2(rawOut[0].Embedding[0])-raw) > 1e-4*raw {
		t.Errorf("embd_normalize -1: %d %s (norm %g, want %g)", status, body, norm2(rawOut[0].Embedding[0]), raw)
	}

	// A chat request to an embedding model is a 400 in the API's shape.
	chatEmbed := greedyChat("hello", 4)
	chatEmbed.Model = "embed"
	_, err = oc.Chat.Completions.New(ctx, chatEmbed)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || !strings.Contains(oe.Message, "embedding model") {
		t.Errorf("chat to an embedding model: %v", err)
	}
	if status, body := postEmbed(t, st.URL()+"/api/chat", `{"model":"embed","messages":[{"role":"user","content":"hi"}]}`, nil); status != 400 || !strings.Contains(body, `"error":"model \"embed\" is an embedding model`) {
		t.Errorf("ollama chat to an embedding model: %d %s", status, body)
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if leaked := leakedGoroutines(before); len(leaked) > 0 {
		t.Errorf("%d goroutines left behind:\n%s", len(leaked), leaked)
	}
}

// A generation model refuses embeddings, in each API's shape.
func TestEmbeddingsOnAGenerationModel(t *testing.T) {
	st := startStack(t, app.Options{})
	oc := openaiClient(st)
	_, err := oc.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "tiny",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || !strings.Contains(oe.Message, "does not support embeddings") {
		t.Errorf("openai: %v", err)
	}
	_, err = ollamaClient(t, st).Embed(context.Background(), &api.EmbedRequest{Model: "tiny", Input: "hi"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || !strings.Contains(se.ErrorMessage, "does not support embeddings") {
		t.Errorf("ollama: %v", err)
	}
	if status, body := postEmbed(t, st.URL()+"/embedding", `{"content":"hi"}`, nil); status != 400 || !strings.Contains(body, "does not support embeddings") {
		t.Errorf("llama.cpp: %d %s", status, body)
	}
}

// postEmbed posts body and decodes a 200 answer into out (when not nil).
func postEmbed(t *testing.T, url, body string, out any) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// `superfluid batch` over an embedding model: a JSONL of embedding
// requests (OpenAI's batch form and bare {"input"} lines) answers what the
// same requests get alone.
func TestEmbeddingsBatchCLI(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	texts := embedTexts(6)
	var lines []string
	for i, text := range texts {
		body := map[string]any{"input": text}
		if i%2 == 0 {
			b, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprint("e", i), "method": "POST", "url": "/v1/embeddings", "body": body})
			lines = append(lines, string(b))
		} else {
			body["custom_id"] = fmt.Sprint("e", i)
			b, _ := json.Marshal(body)
			lines = append(lines, string(b))
		}
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := embedModel(t, "mean")
	if stderr, err := runBatch(t, "--model", model, "--alias", "embed", "--threads", "1", in, "-o", out); err != nil {
		t.Fatalf("batch: %v\n%s", err, stderr)
	}
	recs := readBatchOutput(t, out)
	st := startStack(t, app.Options{ModelPath: model, Alias: "embed"})
	for i, text := range texts {
		r := recs[fmt.Sprint("e", i)]
		if !r.Succeeded() {
			t.Fatalf("e%d: %+v", i, r)
		}
		var got, alone struct {
			Data []struct{ Embedding []float64 }
		}
		if err := json.Unmarshal(r.Response.Body, &got); err != nil || len(got.Data) != 1 {
			t.Fatalf("e%d: %v %s", i, err, r.Response.Body)
		}
		if status, body := postEmbed(t, st.URL()+"/v1/embeddings", `{"input":`+strconv.Quote(text)+`}`, &alone); status != 200 {
			t.Fatalf("e%d alone: %d %s", i, status, body)
		}
		for k, x := range alone.Data[0].Embedding {
			if math.Abs(x-got.Data[0].Embedding[k]) > 1e-5 {
				t.Fatalf("e%d value %d: batch %g, alone %g", i, k, got.Data[0].Embedding[k], x)
			}
		}
	}
}
