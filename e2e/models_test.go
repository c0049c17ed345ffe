package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/synth"
)

// Several models in one process: each request answered by the model it
// names, on every API, as that model answers served alone; on-demand
// loading from the models directory, LRU unloading within --max-models
// with the unloaded model's conversations warm again after it returns;
// Ollama's keep_alive; the FIM model; a load that cannot fit.

// seededModel writes the tiny synthetic model with seed as dir/name.gguf:
// models of different seeds answer differently, so a request routed to
// the wrong model shows in its output.
func seededModel(t testing.TB, dir, name string, seed uint64) string {
	t.Helper()
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".gguf")
	if err := synth.Write(p, synth.Options{Shape: s, Type: "f16", Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return p
}

// modelsOptions is a small stack's options for these tests.
func modelsOptions(path, alias string) app.Options {
	return app.Options{ModelPath: path, Alias: alias, Lanes: 2, Ctx: 1024, HostCache: -1, MemoryBudget: -1}
}

// apiCall is one request in one API's dialect and where its text is.
type apiCall struct {
	api, path string
	body      func(model string) map[string]any
	text      func(raw []byte) string
}

var modelAPICalls = []apiCall{
	{"openai chat", "/v1/chat/completions", func(m string) map[string]any {
		return map[string]any{"model": m, "messages": []map[string]string{{"role": "user", "content": "Tell me a story about a river."}}, "max_tokens": 12, "temperature": 0}
	}, func(raw []byte) string {
		var r struct {
			Choices []struct{ Message struct{ Content string } } `json:"choices"`
		}
		json.Unmarshal(raw, &r)
		if len(r.Choices) == 0 {
			return "?"
		}
		return r.Choices[0].Message.Content
	}},
	{"openai completions", "/v1/completions", func(m string) map[string]any {
		return map[string]any{"model": m, "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}
	}, func(raw []byte) string {
		var r struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		json.Unmarshal(raw, &r)
		if len(r.Choices) == 0 {
			return "?"
		}
		return r.Choices[0].Text
	}},
	{"anthropic", "/v1/messages", func(m string) map[string]any {
		return map[string]any{"model": m, "max_tokens": 12, "temperature": 0, "messages": []map[string]string{{"role": "user", "content": "Tell me a story about a river."}}}
	}, func(raw []byte) string {
		var r struct {
			Content []struct{ Text string } `json:"content"`
		}
		json.Unmarshal(raw, &r)
		if len(r.Content) == 0 {
			return "?"
		}
		return r.Content[0].Text
	}},
	{"ollama", "/api/chat", func(m string) map[string]any {
		return map[string]any{"model": m, "stream": false, "options": map[string]any{"temperature": 0, "num_predict": 12},
			"messages": []map[string]string{{"role": "user", "content": "Tell me a story about a river."}}}
	}, func(raw []byte) string {
		var r struct{ Message struct{ Content string } }
		json.Unmarshal(raw, &r)
		return r.Message.Content
	}},
	{"llama.cpp", "/completion", func(m string) map[string]any {
		return map[string]any{"model": m, "prompt": "Once upon a time", "n_predict": 12, "temperature": 0}
	}, func(raw []byte) string {
		var r struct{ Content string }
		json.Unmarshal(raw, &r)
		return r.Content
	}},
}

// post sends body as JSON and returns the status and the answer.
func post(t testing.TB, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// answers runs every API's call for model, in order, and returns the texts.
func answers(t *testing.T, url, model string) []string {
	t.Helper()
	var out []string
	for _, c := range modelAPICalls {
		status, raw := post(t, url+c.path, c.body(model))
		if status != 200 {
			t.Fatalf("%s for %s: %d %s", c.api, model, status, raw)
		}
		out = append(out, c.text(raw))
	}
	return out
}

type psModel struct {
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	ExpiresAt time.Time `json:"expires_at"`
	Context   int       `json:"context_length"`
}

func apiPS(t testing.TB, url string) map[string]psModel {
	t.Helper()
	resp, err := http.Get(url + "/api/ps")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ Models []psModel }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	out := map[string]psModel{}
	for _, m := range r.Models {
		out[m.Name] = m
	}
	return out
}

func psNames(ps map[string]psModel) []string {
	var names []string
	for n := range ps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// waitPS polls /api/ps until it lists exactly want (sorted), for a while.
func waitPS(t testing.TB, url string, want ...string) map[string]psModel {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps := apiPS(t, url)
		if slices.Equal(psNames(ps), want) {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/ps lists %v, want %v", psNames(ps), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three models at once — two resident, one loaded on demand from the
// models directory — each answering on every API exactly as it does
// served alone; the listings name all of them; an unknown name is a 404
// in each API's shape.
func TestModelsRouteByName(t *testing.T) {
	before := goroutineIDs()
	dir := t.TempDir()
	paths := map[string]string{
		"alpha": seededModel(t, t.TempDir(), "alpha", 21),
		"beta":  seededModel(t, t.TempDir(), "beta", 22),
		"gamma": seededModel(t, dir, "gamma", 23),
	}
	alone := map[string][]string{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		st := startStack(t, modelsOptions(paths[name], name))
		alone[name] = answers(t, st.URL(), name)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("served alone: %q", alone)
	if slices.Equal(alone["alpha"], alone["beta"]) || slices.Equal(alone["beta"], alone["gamma"]) {
		t.Fatalf("the models answer alike; routing could not be told apart: %q", alone)
	}

	o := modelsOptions(paths["alpha"], "alpha")
	o.Models = []app.ModelSpec{{Path: paths["beta"]}}
	o.ModelsDir = dir
	st := startStack(t, o)
	if ps := apiPS(t, st.URL()); !slices.Equal(psNames(ps), []string{"alpha:latest", "beta:latest"}) {
		t.Fatalf("/api/ps at start: %v", psNames(ps))
	}
	for _, name := range []string{"gamma", "beta", "alpha"} {
		got := answers(t, st.URL(), name)
		for i, c := range modelAPICalls {
			if got[i] != alone[name][i] {
				t.Errorf("%s asking for %s: %q, served alone %q", c.api, name, got[i], alone[name][i])
			}
		}
	}
	// All three at once: each engine takes its steps in turn at the
	// process's arbiter, and each answers as it does alone.
	type answer struct{ name, text string }
	got := make(chan answer, 3)
	for _, name := range []string{"alpha", "beta", "gamma"} {
		go func() {
			c := modelAPICalls[1]
			b, _ := json.Marshal(c.body(name))
			resp, err := http.Post(st.URL()+c.path, "application/json", bytes.NewReader(b))
			if err != nil {
				got <- answer{name, err.Error()}
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got <- answer{name, c.text(raw)}
		}()
	}
	for range 3 {
		a := <-got
		if a.text != alone[a.name][1] {
			t.Errorf("%s, asked for beside the others: %q, alone %q", a.name, a.text, alone[a.name][1])
		}
	}
	// The default model answers a request that names none.
	if status, raw := post(t, st.URL()+"/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}); status != 200 || modelAPICalls[1].text(raw) != alone["alpha"][1] {
		t.Errorf("no model named: %d %s, want alpha's %q", status, raw, alone["alpha"][1])
	}
	ps := apiPS(t, st.URL())
	if !slices.Equal(psNames(ps), []string{"alpha:latest", "beta:latest", "gamma:latest"}) {
		t.Fatalf("/api/ps: %v", psNames(ps))
	}
	for name, m := range ps {
		if m.Size <= 0 || m.Context != 1024 {
			t.Errorf("/api/ps %s: %+v", name, m)
		}
	}
	if exp := ps["gamma:latest"].ExpiresAt; exp.Before(time.Now().Add(4*time.Minute)) || exp.After(time.Now().Add(6*time.Minute)) {
		t.Errorf("gamma, loaded on demand, expires at %v, want in about 5m", exp)
	}
	if exp := ps["alpha:latest"].ExpiresAt; exp.Before(time.Now().Add(100 * 24 * time.Hour)) {
		t.Errorf("alpha, resident, expires at %v, want never", exp)
	}
	resp, err := http.Get(st.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"superfluid_models_loaded 3\n", `superfluid_model_bytes{model="gamma"} `, `superfluid_model_turn_waits_total{model="beta"} `} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if strings.Contains(string(metrics), `superfluid_model_decode_tokens_total{model="gamma"} 0`) {
		t.Errorf("/metrics counts no tokens for gamma")
	}
	var tags struct {
		Models []struct{ Name, Digest string }
	}
	getJSON(t, st.URL()+"/api/tags", &tags)
	var oai struct{ Data []struct{ ID string } }
	getJSON(t, st.URL()+"/v1/models", &oai)
	if len(tags.Models) != 3 || len(oai.Data) != 3 || tags.Models[2].Name != "gamma:latest" || tags.Models[2].Digest == "" || oai.Data[1].ID != "beta" {
		t.Errorf("/api/tags %+v, /v1/models %+v: want alpha, beta, gamma", tags, oai)
	}
	for _, c := range modelAPICalls {
		status, raw := post(t, st.URL()+c.path, c.body("nope"))
		api := strings.Fields(c.api)[0]
		if api == "llama.cpp" {
			api = "llamacpp"
		}
		if status != 404 {
			t.Errorf("%s, unknown model: %d %s", c.api, status, raw)
			continue
		}
		if bad := modelNotFound(api, "nope")(parseAPIError(t, api, status, raw)); bad != "" {
			t.Errorf("%s: %s", c.api, bad)
		}
	}
	if status, raw := post(t, st.URL()+"/v1/completions", map[string]any{"model": strings.Repeat("x", 1<<20), "prompt": "x"}); status != 404 || len(raw) > 1000 {
		t.Errorf("a 1 MiB model name: %d, %d bytes of answer; want a short 404", status, len(raw))
	}
	resp, err = http.Get(st.URL() + "/props?model=nope")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || modelNotFound("llamacpp", "nope")(parseAPIError(t, "llamacpp", 404, raw)) != "" {
		t.Errorf("/props?model=nope: %d %s", resp.StatusCode, raw)
	}
	// A name that is a path is not a model of the directory.
	if status, _ := post(t, st.URL()+"/v1/completions", map[string]any{"model": paths["alpha"], "prompt": "x", "max_tokens": 1}); status != 404 {
		t.Errorf("a path as the model name: %d, want 404", status)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if leaked := leakedGoroutines(before); len(leaked) > 0 {
		t.Fatalf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

// modelChat runs one greedy chat turn on model and returns its reply and
// how many prompt tokens the cache served.
func modelChat(t testing.TB, url, model string, msgs []map[string]string) parkReply {
	t.Helper()
	status, raw := post(t, url+"/v1/chat/completions", map[string]any{"model": model, "messages": msgs, "max_tokens": 16, "temperature": 0})
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || status != 200 || len(out.Choices) != 1 {
		t.Fatalf("chat with %s: %d %s", model, status, raw)
	}
	return parkReply{Content: out.Choices[0].Message.Content, Prompt: out.Usage.PromptTokens, Cached: out.Usage.PromptTokensDetails.CachedTokens}
}

// With --max-models 2 and one resident model, asking for a third model
// unloads the least recently used on-demand one; that model's
// conversation, parked as it was unloaded, is warm when it comes back.
func TestModelsLRUUnloadParksAndReloadsWarm(t *testing.T) {
	dir := t.TempDir()
	alpha := seededModel(t, t.TempDir(), "alpha", 21)
	seededModel(t, dir, "beta", 22)
	seededModel(t, dir, "gamma", 23)
	o := modelsOptions(alpha, "alpha")
	o.ModelsDir, o.MaxModels, o.ParkDir = dir, 2, t.TempDir()
	st := startStack(t, o)

	turn1 := parkTurn1()
	b1 := modelChat(t, st.URL(), "beta", turn1)
	waitPS(t, st.URL(), "alpha:latest", "beta:latest")
	modelChat(t, st.URL(), "gamma", turn1)
	waitPS(t, st.URL(), "alpha:latest", "gamma:latest")
	// The resident model is never the one unloaded, however long idle.
	modelChat(t, st.URL(), "alpha", turn1)

	b2 := modelChat(t, st.URL(), "beta:latest", parkTurn2(b1.Content))
	waitPS(t, st.URL(), "alpha:latest", "beta:latest")
	if nb, ng := st.Models.Loads("beta"), st.Models.Loads("gamma"); nb != 2 || ng != 1 {
		t.Errorf("loads: beta %d, gamma %d; want 2 and 1", nb, ng)
	}
	t.Logf("beta's turn 2 after an unload and reload: %d prompt tokens, %d cached (turn 1's prompt %d)", b2.Prompt, b2.Cached, b1.Prompt)
	if b2.Cached < b1.Prompt {
		t.Fatalf("beta's turn 2 after its reload cached %d tokens, want at least turn 1's prompt of %d (parked as it was unloaded)", b2.Cached, b1.Prompt)
	}
}

// Ollama's keep_alive: an empty prompt loads (done_reason load) and with
// keep_alive 0 unloads (done_reason unload); a short keep_alive expires;
// a negative one never does; a resident model told keep_alive 0 unloads
// too and is loaded again by the next request.
func TestModelsKeepAlive(t *testing.T) {
	dir := t.TempDir()
	alpha := seededModel(t, t.TempDir(), "alpha", 21)
	seededModel(t, dir, "beta", 22)
	o := modelsOptions(alpha, "alpha")
	o.ModelsDir = dir
	st := startStack(t, o)
	url := st.URL()

	generate := func(body map[string]any) string {
		t.Helper()
		body["stream"] = false
		status, raw := post(t, url+"/api/generate", body)
		var r struct {
			DoneReason string `json:"done_reason"`
		}
		if json.Unmarshal(raw, &r); status != 200 {
			t.Fatalf("/api/generate %v: %d %s", body, status, raw)
		}
		return r.DoneReason
	}
	if r := generate(map[string]any{"model": "beta", "prompt": ""}); r != "load" {
		t.Errorf("empty prompt: done_reason %q, want load", r)
	}
	ps := waitPS(t, url, "alpha:latest", "beta:latest")
	if exp := ps["beta:latest"].ExpiresAt; exp.Before(time.Now().Add(4 * time.Minute)) {
		t.Errorf("beta expires at %v, want in about 5m (the default keep-alive)", exp)
	}
	if r := generate(map[string]any{"model": "beta", "prompt": "", "keep_alive": 0}); r != "unload" {
		t.Errorf("keep_alive 0: done_reason %q, want unload", r)
	}
	waitPS(t, url, "alpha:latest")

	generate(map[string]any{"model": "beta", "prompt": "Once", "keep_alive": "300ms", "options": map[string]any{"num_predict": 2}})
	start := time.Now()
	waitPS(t, url, "alpha:latest")
	t.Logf("keep_alive 300ms: unloaded %v after the request", time.Since(start).Round(time.Millisecond))

	generate(map[string]any{"model": "beta", "prompt": "", "keep_alive": -1})
	ps = waitPS(t, url, "alpha:latest", "beta:latest")
	if exp := ps["beta:latest"].ExpiresAt; exp.Before(time.Now().Add(100 * 24 * time.Hour)) {
		t.Errorf("keep_alive -1: expires at %v, want never", exp)
	}

	generate(map[string]any{"model": "alpha", "prompt": "", "keep_alive": "0s"})
	waitPS(t, url, "beta:latest")
	if status, raw := post(t, url+"/completion", map[string]any{"prompt": "Once", "n_predict": 2}); status != 200 {
		t.Fatalf("the default model after its unload: %d %s", status, raw)
	}
	ps = waitPS(t, url, "alpha:latest", "beta:latest")
	if exp := ps["alpha:latest"].ExpiresAt; exp.Before(time.Now().Add(100 * 24 * time.Hour)) {
		t.Errorf("alpha, reloaded, expires at %v: want resident again", exp)
	}

	if status, raw := post(t, url+"/api/generate", map[string]any{"model": "beta", "prompt": "", "keep_alive": "soon"}); status != 400 || !strings.Contains(string(raw), "keep_alive") {
		t.Errorf("keep_alive \"soon\": %d %s, want a 400 naming keep_alive", status, raw)
	}
}

// --fim-model answers every fill-in-the-middle request, whatever model it
// names, as that model answers served alone; /props says which it is.
func TestModelsFIMModel(t *testing.T) {
	alpha := seededModel(t, t.TempDir(), "alpha", 21)
	coder := seededModel(t, t.TempDir(), "coder", 24)
	calls := []struct {
		path string
		body map[string]any
		text func([]byte) string
	}{
		{"/infill", map[string]any{"model": "alpha", "input_prefix": "def add(a, b):\n", "input_suffix": "\n\nprint(add(1, 2))\n", "n_predict": 10, "temperature": 0},
			modelAPICalls[4].text},
		{"/v1/completions", map[string]any{"model": "alpha", "prompt": "def add(a, b):\n", "suffix": "\n\nprint(add(1, 2))\n", "max_tokens": 10, "temperature": 0},
			modelAPICalls[1].text},
		{"/api/generate", map[string]any{"model": "alpha", "prompt": "def add(a, b):\n", "suffix": "\n\nprint(add(1, 2))\n", "stream": false, "options": map[string]any{"num_predict": 10, "temperature": 0}},
			func(raw []byte) string {
				var r struct{ Response string }
				json.Unmarshal(raw, &r)
				return r.Response
			}},
	}
	run := func(url string) []string {
		var out []string
		for _, c := range calls {
			status, raw := post(t, url+c.path, c.body)
			if status != 200 {
				t.Fatalf("%s: %d %s", c.path, status, raw)
			}
			out = append(out, c.text(raw))
		}
		return out
	}
	st := startStack(t, modelsOptions(coder, "alpha")) // coder alone, under the name the requests use
	want := run(st.URL())
	st.Close()
	st = startStack(t, modelsOptions(alpha, "alpha"))
	own := run(st.URL())
	st.Close()
	if slices.Equal(want, own) {
		t.Fatalf("alpha and coder fill in alike: %q", want)
	}

	o := modelsOptions(alpha, "alpha")
	o.FIMModelPath = coder
	st = startStack(t, o)
	got := run(st.URL())
	for i, c := range calls {
		if got[i] != want[i] {
			t.Errorf("%s naming alpha: %q, want the FIM model's %q", c.path, got[i], want[i])
		}
	}
	var props map[string]any
	getJSON(t, st.URL()+"/props", &props)
	if props["superfluid_fim_model"] != "coder" {
		t.Errorf("/props superfluid_fim_model = %v, want coder", props["superfluid_fim_model"])
	}
	// A request without a suffix is alpha's own.
	if status, raw := post(t, st.URL()+"/v1/completions", map[string]any{"model": "alpha", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}); status != 200 {
		t.Fatalf("plain completion: %d %s", status, raw)
	}
}

// A model that cannot fit the memory budget is refused, in the API's
// shape, with a message naming the sizes; what is loaded stays loaded.
func TestModelsNoRoom(t *testing.T) {
	dir := t.TempDir()
	alpha := seededModel(t, t.TempDir(), "alpha", 21)
	beta := seededModel(t, dir, "beta", 22)
	fi, err := os.Stat(beta)
	if err != nil {
		t.Fatal(err)
	}
	o := modelsOptions(alpha, "alpha")
	o.ModelsDir, o.MemoryBudget = dir, fi.Size()/2
	st := startStack(t, o)
	status, raw := post(t, st.URL()+"/v1/chat/completions", map[string]any{"model": "beta", "messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2})
	var e struct {
		Error struct{ Message, Type string }
	}
	if json.Unmarshal(raw, &e) != nil || status != 507 || !strings.Contains(e.Error.Message, "memory budget") || !strings.Contains(e.Error.Message, `"beta"`) {
		t.Fatalf("beta over the budget: %d %s, want 507 in OpenAI's shape naming beta and the budget", status, raw)
	}
	t.Logf("refusal: %s", e.Error.Message)
	waitPS(t, st.URL(), "alpha:latest")
	// Concurrent requests for a model that loads wait for the one load.
	o2 := modelsOptions(alpha, "alpha")
	o2.ModelsDir = dir
	st2 := startStack(t, o2)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			status, raw := post(t, st2.URL()+"/completion", map[string]any{"model": "beta", "prompt": "Once", "n_predict": 2})
			if status != 200 {
				errs <- fmt.Errorf("%d %s", status, raw)
				return
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	waitPS(t, st2.URL(), "alpha:latest", "beta:latest")
	if n := st2.Models.Loads("beta"); n != 1 {
		t.Errorf("beta loaded %d times for 4 concurrent requests, want once", n)
	}
	// A file of the directory that is no model fails its load clearly,
	// and the server goes on.
	if err := os.WriteFile(filepath.Join(dir, "broken.gguf"), []byte("GGUF but not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, raw = post(t, st2.URL()+"/api/chat", map[string]any{"model": "broken", "messages": []map[string]string{{"role": "user", "content": "hi"}}})
	if status != 500 || !strings.Contains(string(raw), `loading model \"broken\"`) {
		t.Errorf("a broken model file: %d %s, want a 500 saying the load failed", status, raw)
	}
	waitPS(t, st2.URL(), "alpha:latest", "beta:latest")
}

// The CLI: --model twice (by path and by the models directory's name),
// --fim-model, --max-models and --memory-budget reach the registry.
func TestModelsServeProcess(t *testing.T) {
	dir := t.TempDir()
	alpha := seededModel(t, t.TempDir(), "alpha", 21)
	seededModel(t, dir, "beta", 22)
	seededModel(t, dir, "gamma", 23)
	coder := seededModel(t, t.TempDir(), "coder", 24)
	p := startServe(t, []string{"SUPERFLUID_THREADS=1", "SUPERFLUID_CTX=1024"},
		"--model", alpha, "--model", "beta", "--models-dir", dir, "--fim-model", coder, "--max-models", "3",
		"--memory-budget", "1GiB", "--host-cache", "0", "--port", "0", "--park-dir", "off", "--data-dir", "off")
	waitPS(t, p.url, "alpha:latest", "beta:latest", "coder:latest")
	var props map[string]any
	getJSON(t, p.url+"/props?model=beta", &props)
	if props["model_alias"] != "beta" || props["superfluid_fim_model"] != "coder" {
		t.Errorf("/props?model=beta: alias %v, FIM model %v", props["model_alias"], props["superfluid_fim_model"])
	}
	if status, raw := post(t, p.url+"/v1/completions", map[string]any{"model": "gamma", "prompt": "Once", "max_tokens": 2}); status != 507 || !strings.Contains(string(raw), "--max-models 3") {
		t.Errorf("a fourth model with three resident: %d %s, want 507 naming --max-models", status, raw)
	}
}

// An embedding model beside a chat model: loaded on demand from the
// models directory through the embedding builder, it answers embeddings
// as it does served alone and refuses generation; the chat model keeps
// generating; both take their turns at the one arbiter.
func TestModelsEmbeddingBesideChat(t *testing.T) {
	dir := t.TempDir()
	alpha := seededModel(t, t.TempDir(), "alpha", 21)
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(filepath.Join(dir, "embedder.gguf"), synth.Options{Shape: s, Type: "f16", Seed: 11, Pooling: "mean"}); err != nil {
		t.Fatal(err)
	}
	embedBody := map[string]any{"model": "embedder", "input": []string{"the quick fox", "a lazy dog"}}
	aloneSt := startStack(t, modelsOptions(filepath.Join(dir, "embedder.gguf"), "embedder"))
	status, want := post(t, aloneSt.URL()+"/v1/embeddings", embedBody)
	if status != 200 {
		t.Fatalf("embeddings alone: %d %s", status, want)
	}
	aloneSt.Close()

	o := modelsOptions(alpha, "alpha")
	o.ModelsDir = dir
	st := startStack(t, o)
	status, got := post(t, st.URL()+"/v1/embeddings", embedBody)
	if status != 200 {
		t.Fatalf("embeddings beside alpha: %d %s", status, got)
	}
	vectors := func(raw []byte) [][]float64 {
		var r struct {
			Data []struct{ Embedding []float64 }
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		var out [][]float64
		for _, d := range r.Data {
			out = append(out, d.Embedding)
		}
		return out
	}
	gv, wv := vectors(got), vectors(want)
	if len(gv) != 2 || len(gv) != len(wv) {
		t.Fatalf("%d vectors, alone %d", len(gv), len(wv))
	}
	for i := range gv {
		if !slices.Equal(gv[i], wv[i]) {
			t.Errorf("vector %d differs from the model served alone", i)
		}
	}
	waitPS(t, st.URL(), "alpha:latest", "embedder:latest")
	if status, raw := post(t, st.URL()+"/v1/chat/completions", map[string]any{"model": "embedder", "messages": []map[string]string{{"role": "user", "content": "hi"}}}); status != 400 || !strings.Contains(string(raw), "embedding model") {
		t.Errorf("chat with the embedding model: %d %s, want a 400", status, raw)
	}
	if status, raw := post(t, st.URL()+"/v1/embeddings", map[string]any{"model": "alpha", "input": "x"}); status != 400 {
		t.Errorf("embeddings from the chat model: %d %s, want a 400", status, raw)
	}
	modelChat(t, st.URL(), "alpha", parkTurn1())
	if status, raw := post(t, st.URL()+"/api/embed", map[string]any{"model": "embedder", "input": "x", "keep_alive": 0}); status != 200 {
		t.Fatalf("/api/embed keep_alive 0: %d %s", status, raw)
	}
	waitPS(t, st.URL(), "alpha:latest")
}
