package http

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"superfluid/embed"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/metric"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

const stubDim = 8

// stubEmbedder gives each input a vector that depends on all its tokens
// (not normalized), and records the classes and inputs of its calls.
type stubEmbedder struct {
	mu      sync.Mutex
	classes []sched.Class
	inputs  [][]engine.Token
	err     error
	maxTok  int
}

func stubVector(in []engine.Token) []float32 {
	v := make([]float32, stubDim)
	for i, t := range in {
		for k := range v {
			v[k] += float32((int(t)+1)*(k+1)%17-8) * float32(i+1)
		}
	}
	return v
}

func (s *stubEmbedder) Embed(_ context.Context, inputs [][]engine.Token, c sched.Class) ([][]float32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.classes = append(s.classes, c)
	s.inputs = append(s.inputs, inputs...)
	if s.err != nil {
		return nil, s.err
	}
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		out[i] = stubVector(in)
	}
	return out, nil
}

func (s *stubEmbedder) MaxInputTokens() int {
	if s.maxTok > 0 {
		return s.maxTok
	}
	return 64
}
func (s *stubEmbedder) Dim() int { return stubDim }

var stubEmbedCalls = metric.Counter("superfluid_embed_calls_total", "Engine calls.")

func (s *stubEmbedder) AddMetrics(p *metric.Page) { p.Add(stubEmbedCalls, float64(len(s.classes))) }

// embedServer serves an embedding model (no scheduler) over tasktest.StubText.
func embedServer(t *testing.T) (*nethttp.Client, *stubEmbedder) {
	t.Helper()
	m, _ := stubModel(t)
	m.Sched = nil
	st := &stubEmbedder{}
	m.Embed = st
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetModel(m)
	return memServer(t, s), st
}

func l2(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func decodeB64(t *testing.T, s string) []float64 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("base64 %q: %v", s, err)
	}
	out := make([]float64, len(b)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

func TestOpenAIEmbeddings(t *testing.T) {
	c, st := embedServer(t)
	type resp struct {
		Data []struct {
			Index     int             `json:"index"`
			Object    string          `json:"object"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Model string `json:"model"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	post := func(body string) resp {
		t.Helper()
		status, _, b := call(t, c, "POST", "/v1/embeddings", body)
		if status != 200 {
			t.Fatalf("%s: %d %s", body, status, b)
		}
		var r resp
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	floats := post(`{"model":"stub","input":["hello","world!","hi"]}`)
	b64 := post(`{"input":["hello","world!","hi"],"encoding_format":"base64"}`)
	if len(floats.Data) != 3 || floats.Usage.PromptTokens != 5+6+2 || floats.Usage.TotalTokens != 13 || floats.Model != "stub" {
		t.Fatalf("response %+v", floats)
	}
	for i := range floats.Data {
		var f []float64
		if err := json.Unmarshal(floats.Data[i].Embedding, &f); err != nil {
			t.Fatal(err)
		}
		var s string
		if err := json.Unmarshal(b64.Data[i].Embedding, &s); err != nil {
			t.Fatal(err)
		}
		g := decodeB64(t, s)
		if fmt.Sprint(f) != fmt.Sprint(g) || len(f) != stubDim {
			t.Errorf("input %d: float %v, base64 %v", i, f, g)
		}
		for k := range f {
			if math.Float64bits(f[k]) != math.Float64bits(g[k]) {
				t.Errorf("input %d float %d: %x vs %x", i, k, math.Float64bits(f[k]), math.Float64bits(g[k]))
			}
		}
		if n := l2(f); math.Abs(n-1) > 1e-6 {
			t.Errorf("input %d: norm %g", i, n)
		}
		if floats.Data[i].Index != i || floats.Data[i].Object != "embedding" {
			t.Errorf("data %d: %+v", i, floats.Data[i])
		}
	}
	// Token ids embed as the text they spell does.
	ids := post(`{"input":[[104,105]]}`)
	if string(ids.Data[0].Embedding) != string(floats.Data[2].Embedding) {
		t.Errorf("token ids %s, text %s", ids.Data[0].Embedding, floats.Data[2].Embedding)
	}
	// dimensions: the first n values of the same direction, unit length.
	var full, cut []float64
	json.Unmarshal(floats.Data[0].Embedding, &full)
	json.Unmarshal(post(`{"input":"hello","dimensions":3}`).Data[0].Embedding, &cut)
	if len(cut) != 3 || math.Abs(l2(cut)-1) > 1e-6 {
		t.Fatalf("dimensions 3: %v", cut)
	}
	n3 := l2(full[:3])
	for k := range cut {
		if math.Abs(cut[k]-full[k]/n3) > 1e-6 {
			t.Errorf("dimensions: value %d is %g, want %g", k, cut[k], full[k]/n3)
		}
	}
	// The default class is Background; the header names another.
	st.mu.Lock()
	st.classes = nil
	st.mu.Unlock()
	post(`{"input":"x"}`)
	req, _ := nethttp.NewRequest("POST", "http://superfluid/v1/embeddings", strings.NewReader(`{"input":"x"}`))
	req.Header.Set("X-Superfluid-Class", "chat")
	if r, err := c.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("with a class header: %v %v", r, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if fmt.Sprint(st.classes) != fmt.Sprint([]sched.Class{sched.Background, sched.Chat}) {
		t.Errorf("classes %v", st.classes)
	}
}

func TestOllamaEmbed(t *testing.T) {
	c, _ := embedServer(t)
	status, _, b := call(t, c, "POST", "/api/embed", `{"model":"stub","input":["hello","abc"],"keep_alive":"5m","options":{"temperature":0.3}}`)
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	var r struct {
		Model           string      `json:"model"`
		Embeddings      [][]float64 `json:"embeddings"`
		PromptEvalCount int         `json:"prompt_eval_count"`
		TotalDuration   *int64      `json:"total_duration"`
		LoadDuration    *int64      `json:"load_duration"`
	}
	json.Unmarshal(b, &r)
	if len(r.Embeddings) != 2 || r.PromptEvalCount != 8 || r.Model != "stub" || r.TotalDuration == nil || r.LoadDuration == nil {
		t.Fatalf("response %s", b)
	}
	for i, v := range r.Embeddings {
		if math.Abs(l2(v)-1) > 1e-6 {
			t.Errorf("embedding %d: norm %g", i, l2(v))
		}
	}
	// Truncation: on by default, to num_ctx; off, a 400.
	long := strings.Repeat("a", 100)
	status, _, b = call(t, c, "POST", "/api/embed", `{"model":"stub","input":"`+long+`","options":{"num_ctx":10}}`)
	json.Unmarshal(b, &r)
	if status != 200 || r.PromptEvalCount != 10 {
		t.Fatalf("truncated: %d %s", status, b)
	}
	status, _, b = call(t, c, "POST", "/api/embed", `{"model":"stub","input":"`+long+`","truncate":false}`)
	if status != 400 || !strings.Contains(errorShapeOf(t, wire.Ollama, status, b), "at most 64") {
		t.Fatalf("not truncated: %d %s", status, b)
	}
	// No input: an empty list, as Ollama answers.
	status, _, b = call(t, c, "POST", "/api/embed", `{"model":"stub"}`)
	if status != 200 || !strings.Contains(string(b), `"embeddings":[]`) {
		t.Fatalf("no input: %d %s", status, b)
	}
	// The older route: one vector, not normalized.
	status, _, b = call(t, c, "POST", "/api/embeddings", `{"model":"stub","prompt":"hello"}`)
	var old struct{ Embedding []float64 }
	json.Unmarshal(b, &old)
	want := stubVector([]engine.Token{'h', 'e', 'l', 'l', 'o'})
	if status != 200 || len(old.Embedding) != stubDim || old.Embedding[0] != float64(want[0]) {
		t.Fatalf("/api/embeddings: %d %s (want %v)", status, b, want)
	}
}

func TestLlamaEmbedding(t *testing.T) {
	c, _ := embedServer(t)
	for _, path := range []string{"/embedding", "/embeddings"} {
		status, _, b := call(t, c, "POST", path, `{"content":["ab",[1,2,3]],"embd_normalize":-1}`)
		var r []struct {
			Index     int         `json:"index"`
			Embedding [][]float64 `json:"embedding"`
		}
		if status != 200 || json.Unmarshal(b, &r) != nil || len(r) != 2 || len(r[1].Embedding) != 1 {
			t.Fatalf("%s: %d %s", path, status, b)
		}
		want := stubVector([]engine.Token{1, 2, 3})
		for k := range want {
			if r[1].Embedding[0][k] != float64(want[k]) {
				t.Fatalf("%s: embd_normalize -1 changed the vector: %v, want %v", path, r[1].Embedding[0], want)
			}
		}
	}
	status, _, b := call(t, c, "POST", "/embedding", `{"input":"abc","embd_normalize":0}`)
	var r []struct{ Embedding [][]float64 }
	json.Unmarshal(b, &r)
	maxAbs := 0.0
	for _, x := range r[0].Embedding[0] {
		maxAbs = max(maxAbs, math.Abs(x))
	}
	if status != 200 || math.Abs(maxAbs-32760) > 0.01 {
		t.Fatalf("max-abs normalization: %d %s", status, b)
	}
	status, _, b = call(t, c, "POST", "/embedding", `{"input":"abc","embd_normalize":7}`)
	json.Unmarshal(b, &r)
	var p float64
	for _, x := range r[0].Embedding[0] {
		p += math.Pow(math.Abs(x), 7)
	}
	if status != 200 || math.Abs(math.Pow(p, 1.0/7)-1) > 1e-5 {
		t.Fatalf("7-norm: %d %s", status, b)
	}
}

// Hostile bodies get a 400 in the route's own shape naming what is wrong,
// and never reach the runner.
func TestEmbedRefusesBadInput(t *testing.T) {
	c, st := embedServer(t)
	huge := "[" + strings.Repeat(`"a",`, task.MaxEmbedInputs) + `"a"]`
	cases := []struct{ path, body, want string }{
		{"/v1/embeddings", `{"input":` + huge + `}`, "at most 2048"},
		{"/v1/embeddings", `{"input":[{"text":"a"}]}`, "input[0] must be"},
		{"/v1/embeddings", `{"input":[[1,"x"]]}`, "token 1 must be an integer"},
		{"/v1/embeddings", `{"input":[true]}`, "input[0] must be"},
		{"/v1/embeddings", `{"input":[1,-1]}`, "outside the vocabulary"},
		{"/v1/embeddings", `{"input":[1,257]}`, "outside the vocabulary"},
		{"/v1/embeddings", `{"input":[[1e10]]}`, "outside the vocabulary"},
		{"/v1/embeddings", `{"input":[1.5]}`, "integer token id"},
		{"/v1/embeddings", `{"input":[[]]}`, "input 0 is empty"},
		{"/v1/embeddings", `{"input":""}`, "empty string"},
		{"/v1/embeddings", `{"input":[]}`, "no inputs"},
		{"/v1/embeddings", `{}`, "input is required"},
		{"/v1/embeddings", `{"input":7}`, "must be a string or an array"},
		{"/v1/embeddings", `{"input":["a",[1]]}`, "mixes"},
		{"/v1/embeddings", `{"input":"a","dimensions":0}`, "dimensions"},
		{"/v1/embeddings", `{"input":"a","dimensions":-3}`, "dimensions"},
		{"/v1/embeddings", `{"input":"a","dimensions":9}`, "dimensions"},
		{"/v1/embeddings", `{"input":"a","dimensions":1e400}`, "dimensions"},
		{"/v1/embeddings", `{"input":"a","dimensions":"NaN"}`, "dimensions"},
		{"/v1/embeddings", `{"input":"a","dimensions":2.5}`, "dimensions"},
		{"/v1/embeddings", `{"input":"a","encoding_format":"hex"}`, "encoding_format"},
		{"/v1/embeddings", `{"input":"a","embd_normalize":-2}`, "embd_normalize"},
		{"/v1/embeddings", `{"input":"` + strings.Repeat("a", 65) + `"}`, "at most 64"},
		{"/v1/embeddings", `{"model":"other","input":"a"}`, "not found"},
		{"/api/embed", `{"model":"stub","input":[[1,2]]}`, "must be a string"},
		{"/api/embed", `{"model":"stub","input":[1,2]}`, "must be a string or an array of strings"},
		{"/api/embed", `{"model":"stub","input":"a","dimensions":-1}`, "dimensions"},
		{"/api/embed", `{"model":"stub","input":"a","dimensions":99}`, "dimensions"},
		{"/api/embed", `{"model":"stub","input":"a","keep_alive":"forever"}`, "keep_alive"},
		{"/api/embed", `{"model":"stub","input":"a","options":{"num_ctx":"x"}}`, "num_ctx"},
		{"/api/embed", `{"input":"a"}`, "model is required"},
		{"/api/embeddings", `{"model":"stub","prompt":["a"]}`, "prompt"},
		{"/api/embeddings", `{"model":"stub","prompt":"` + strings.Repeat("a", 65) + `"}`, "at most 64"},
		{"/embedding", `{}`, `"input" or "content"`},
		{"/embedding", `{"content":[{"prompt_string":"a"}]}`, "content[0] must be"},
		{"/embedding", `{"content":"a","encoding_format":"base64"}`, "encoding_format"},
		{"/embedding", `{"content":"a","embd_normalize":1.5}`, "embd_normalize"},
		{"/embeddings", `{"input":[70000]}`, "outside the vocabulary"},
	}
	for _, tc := range cases {
		status, _, b := call(t, c, "POST", tc.path, tc.body)
		kind := kindOfPath(tc.path)
		if status != 400 && status != 404 {
			t.Errorf("%s %.80s: status %d %s", tc.path, tc.body, status, b)
			continue
		}
		if msg := errorShapeOf(t, kind, status, b); !strings.Contains(msg, tc.want) {
			t.Errorf("%s %.80s: %q, want it to say %q", tc.path, tc.body, msg, tc.want)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.inputs) != 0 {
		t.Errorf("refused requests reached the runner: %d inputs", len(st.inputs))
	}
}

// A generation model refuses the embedding routes; an embedding model
// refuses the generation routes; both in the route's shape.
func TestModelKindsRefuseEachOthersRoutes(t *testing.T) {
	c, _ := embedServer(t)
	for _, path := range generationPaths {
		status, _, b := call(t, c, "POST", path, `{"model":"stub","prompt":"hi","messages":[{"role":"user","content":"hi"}]}`)
		if status != 400 || !strings.Contains(errorShapeOf(t, kindOfPath(path), status, b), "is an embedding model") {
			t.Errorf("%s to an embedding model: %d %s", path, status, b)
		}
	}
	status, _, b := call(t, c, "GET", "/metrics", "")
	if status != 200 || !strings.Contains(string(b), "superfluid_embed_calls_total") {
		t.Errorf("/metrics of an embedding model: %d %.300s", status, b)
	}

	m, _ := stubModel(t)
	s, _ := NewServer(Config{})
	s.SetModel(m)
	gc := memServer(t, s)
	for _, path := range []string{"/v1/embeddings", "/api/embed", "/api/embeddings", "/embedding", "/embeddings"} {
		status, _, b := call(t, gc, "POST", path, `{"model":"stub","input":"a","prompt":"a"}`)
		if status != 400 || !strings.Contains(errorShapeOf(t, kindOfPath(path), status, b), "does not support embeddings") {
			t.Errorf("%s to a generation model: %d %s", path, status, b)
		}
	}
}

// The runner's refusals reach the client in the API's shape.
func TestEmbedRunnerErrors(t *testing.T) {
	c, st := embedServer(t)
	for err, want := range map[error]int{embed.ErrQueueFull: 503, embed.ErrClosed: 503, engine.ErrException: 500} {
		st.mu.Lock()
		st.err = err
		st.mu.Unlock()
		status, _, b := call(t, c, "POST", "/v1/embeddings", `{"input":"a"}`)
		if status != want {
			t.Errorf("%v: %d %s", err, status, b)
		}
		errorShapeOf(t, wire.OpenAI, status, b)
	}
}

// Ollama clients read an embedding model's capabilities from /api/show.
func TestOllamaShowsEmbeddingCapability(t *testing.T) {
	c, _ := embedServer(t)
	status, _, b := call(t, c, "POST", "/api/show", `{"model":"stub"}`)
	var r struct{ Capabilities []string }
	if status != 200 || json.Unmarshal(b, &r) != nil || fmt.Sprint(r.Capabilities) != "[embedding]" {
		t.Fatalf("show: %d %s", status, b)
	}
}

// blockingEmbedder waits for its request's context to end and reports it.
type blockingEmbedder struct {
	stubEmbedder
	cancelled chan struct{}
}

func (b *blockingEmbedder) Embed(ctx context.Context, _ [][]engine.Token, _ sched.Class) ([][]float32, error) {
	<-ctx.Done()
	close(b.cancelled)
	return nil, ctx.Err()
}

// A client that hangs up cancels its embedding request: the runner drops
// what it had not run.
func TestEmbedClientGoneCancels(t *testing.T) {
	m, _ := stubModel(t)
	m.Sched = nil
	be := &blockingEmbedder{cancelled: make(chan struct{})}
	m.Embed = be
	s, err := NewServer(Config{ClientPoll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.SetModel(m)
	// A real socket: the watch peeks at the connection, which an
	// in-memory pipe cannot show closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() { s.srv.Shutdown(); <-done }()
	c := &nethttp.Client{Timeout: 100 * time.Millisecond}
	if resp, err := c.Post("http://"+ln.Addr().String()+"/v1/embeddings", "application/json", strings.NewReader(`{"input":"a"}`)); err == nil {
		resp.Body.Close()
		t.Fatal("the blocked request answered")
	}
	select {
	case <-be.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context did not end when its client left")
	}
}

// eosText is tasktest.StubText with the EOS a vocabulary's add_special appends.
type eosText struct{ tasktest.StubText }

func (t eosText) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	toks, _ := t.StubText.Tokenize(text, addSpecial, parseSpecial)
	if addSpecial {
		toks = append(toks, tasktest.StubEOS)
	}
	return toks, nil
}

// Inputs are tokenized with the vocabulary's special tokens, and a cut
// keeps the EOS last.
func TestEmbedTruncationKeepsEOS(t *testing.T) {
	m, _ := stubModel(t)
	m.Sched, m.Text = nil, eosText{}
	st := &stubEmbedder{}
	m.Embed = st
	s, _ := NewServer(Config{})
	s.SetModel(m)
	c := memServer(t, s)
	if status, _, b := call(t, c, "POST", "/api/embed", `{"model":"stub","input":["abc","`+strings.Repeat("x", 100)+`"],"options":{"num_ctx":10}}`); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if fmt.Sprint(st.inputs[0]) != fmt.Sprint([]engine.Token{'a', 'b', 'c', tasktest.StubEOS}) {
		t.Errorf("short input %v", st.inputs[0])
	}
	if got := st.inputs[1]; len(got) != 10 || got[9] != tasktest.StubEOS || got[8] != 'x' {
		t.Errorf("cut input %v", got)
	}
}
