package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/engine"
	"superfluid/sched"
)

// The llama.cpp-native API over a real socket: /completion, /tokenize,
// /detokenize, /props and /slots (/infill is in llamacpp_infill_test.go).
// Everything generated is greedy, so answers are compared exactly.

// llamaCompletion is the part of a /completion or /infill result the
// tests read.
type llamaCompletion struct {
	Index              int                        `json:"index"`
	Content            string                     `json:"content"`
	Tokens             []engine.Token             `json:"tokens"`
	Stop               bool                       `json:"stop"`
	StopType           string                     `json:"stop_type"`
	StoppingWord       string                     `json:"stopping_word"`
	TokensPredicted    int                        `json:"tokens_predicted"`
	TokensEvaluated    int                        `json:"tokens_evaluated"`
	TokensCached       int                        `json:"tokens_cached"`
	Truncated          bool                       `json:"truncated"`
	Model              string                     `json:"model"`
	IDSlot             int                        `json:"id_slot"`
	Prompt             string                     `json:"prompt"`
	GenerationSettings map[string]json.RawMessage `json:"generation_settings"`
	Timings            struct {
		CacheN      int     `json:"cache_n"`
		PromptN     int     `json:"prompt_n"`
		PromptMS    float64 `json:"prompt_ms"`
		PredictedN  int     `json:"predicted_n"`
		PredictedMS float64 `json:"predicted_ms"`
	} `json:"timings"`
	Probs []struct {
		ID          engine.Token `json:"id"`
		Token       string       `json:"token"`
		Logprob     float64      `json:"logprob"`
		TopLogprobs []struct {
			ID      engine.Token `json:"id"`
			Logprob float64      `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"completion_probabilities"`
}

// llamaPost sends a JSON body and returns the status and answer.
func llamaPost(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading: %v", url, err)
	}
	return resp.StatusCode, b
}

// llamaGet fetches a URL and returns the status and answer.
func llamaGet(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading: %v", url, err)
	}
	return resp.StatusCode, b
}

// llamaDo posts body to path (or GETs it when body is ""), requires 200,
// and decodes the answer.
func llamaDo[T any](t testing.TB, st *app.Stack, path, body string) T {
	t.Helper()
	var status int
	var b []byte
	if body == "" {
		status, b = llamaGet(t, st.URL()+path)
	} else {
		status, b = llamaPost(t, st.URL()+path, body)
	}
	var out T
	if status != 200 {
		t.Fatalf("%s %.200s: %d %s", path, body, status, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return out
}

// llamaEvents reads a llama.cpp SSE stream: every event a "data:" line,
// never a [DONE].
func llamaEvents(t testing.TB, st *app.Stack, path, body string) []llamaCompletion {
	t.Helper()
	resp, err := http.Post(st.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var out []llamaCompletion
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			t.Fatalf("not a llama.cpp event: %q", line)
		}
		var ev llamaCompletion
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		out = append(out, ev)
	}
	return out
}

// llamaTokens is /tokenize's answer for text.
func llamaTokens(t testing.TB, st *app.Stack, text string, addSpecial bool) []engine.Token {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"content": text, "add_special": addSpecial})
	return llamaDo[struct {
		Tokens []engine.Token `json:"tokens"`
	}](t, st, "/tokenize", string(body)).Tokens
}

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A greedy completion, whole and streamed: the fields llama.cpp clients
// read, and the streamed pieces add up to the whole content.
func TestLlamaCompletionWholeAndStreamed(t *testing.T) {
	st := startStack(t, app.Options{})
	body := `{"prompt":"The quick brown fox","n_predict":24,"temperature":0}`
	whole := llamaDo[llamaCompletion](t, st, "/completion", body)
	prompt := llamaTokens(t, st, "The quick brown fox", true)
	if !whole.Stop || whole.StopType != "limit" || whole.TokensPredicted != 24 || whole.TokensEvaluated != len(prompt) ||
		whole.Content == "" || whole.Model != "tiny" || whole.IDSlot != -1 || whole.Truncated || len(whole.Tokens) != 0 {
		t.Fatalf("whole: %+v", whole)
	}
	if whole.Timings.PredictedN != 24 || whole.Timings.PromptN+whole.Timings.CacheN != len(prompt) || whole.Timings.PredictedMS <= 0 {
		t.Errorf("timings %+v", whole.Timings)
	}
	if string(whole.GenerationSettings["n_predict"]) != "24" || string(whole.GenerationSettings["temperature"]) != "0" {
		t.Errorf("generation_settings %v", whole.GenerationSettings)
	}
	events := llamaEvents(t, st, "/completion", strings.Replace(body, "}", `,"stream":true}`, 1))
	var text strings.Builder
	ids := 0
	for _, ev := range events[:len(events)-1] {
		if ev.Stop {
			t.Fatalf("a partial event says stop: %+v", ev)
		}
		text.WriteString(ev.Content)
		ids += len(ev.Tokens)
	}
	last := events[len(events)-1]
	if !last.Stop || last.Content != "" || last.StopType != "limit" || last.TokensPredicted != 24 || text.String() != whole.Content || ids != 24 {
		t.Fatalf("streamed %q in %d ids, last %+v; whole %q", text.String(), ids, last, whole.Content)
	}
}

// Greedy /completion is what the scheduler generates for the same prompt
// tokens (the path `superfluid run` takes through the engine), and what
// /v1/completions says at temperature 0.
func TestLlamaCompletionEqualsSchedulerAndOpenAI(t *testing.T) {
	st := startStack(t, app.Options{})
	const prompt = "Once upon a time"
	toks, err := st.Engine.Tokenize(prompt, st.Engine.Descriptor().AddBOS, true)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := st.Sched.Submit(context.Background(), sched.Request{Prompt: toks, MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := stream.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var direct []byte
	var directIDs []engine.Token
	for _, tok := range got {
		direct = st.Engine.AppendPiece(direct, tok.Token, false)
		directIDs = append(directIDs, tok.Token)
	}
	c := llamaDo[llamaCompletion](t, st, "/completion", `{"prompt":"Once upon a time","n_predict":20,"temperature":0,"return_tokens":true}`)
	if c.Content != string(direct) || !slices.Equal(c.Tokens, directIDs) {
		t.Fatalf("/completion %q %v, scheduler %q %v", c.Content, c.Tokens, direct, directIDs)
	}
	oai := llamaDo[struct {
		Choices []struct{ Text string } `json:"choices"`
	}](t, st, "/v1/completions", `{"model":"tiny","prompt":"Once upon a time","max_tokens":20,"temperature":0}`)
	if len(oai.Choices) != 1 || oai.Choices[0].Text != c.Content {
		t.Fatalf("/v1/completions %+v, /completion %q", oai.Choices, c.Content)
	}
}

// Every prompt shape llama.cpp accepts: token ids, ids mixed with text, and
// several prompts at once (answered as an array in prompt order).
func TestLlamaCompletionPromptShapes(t *testing.T) {
	st := startStack(t, app.Options{})
	greedy := func(prompt any) string {
		return jsonBody(map[string]any{"prompt": prompt, "n_predict": 8, "temperature": 0})
	}
	byText := llamaDo[llamaCompletion](t, st, "/completion", greedy("Hello world"))
	ids := llamaTokens(t, st, "Hello world", true)
	byIDs := llamaDo[llamaCompletion](t, st, "/completion", greedy(ids))
	if byIDs.Content != byText.Content || byIDs.TokensEvaluated != len(ids) {
		t.Fatalf("ids %v gave %q, text gave %q", ids, byIDs.Content, byText.Content)
	}
	world := llamaTokens(t, st, " world", false)
	mixed := append([]any{"Hello"}, anySlice(world)...)
	byMixed := llamaDo[llamaCompletion](t, st, "/completion", greedy(mixed))
	if want := len(llamaTokens(t, st, "Hello", true)) + len(world); byMixed.TokensEvaluated != want {
		t.Fatalf("mixed prompt evaluated %d tokens, want %d", byMixed.TokensEvaluated, want)
	}
	many := llamaDo[[]llamaCompletion](t, st, "/completion", greedy([]any{"Hello world", ids, "Goodbye"}))
	bye := llamaDo[llamaCompletion](t, st, "/completion", greedy("Goodbye"))
	if len(many) != 3 || many[0].Index != 0 || many[1].Index != 1 || many[2].Index != 2 ||
		many[0].Content != byText.Content || many[1].Content != byText.Content || many[2].Content != bye.Content {
		t.Fatalf("several prompts: %+v", many)
	}
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// stop ends the completion before the stop word; n_probs reports each
// token's top alternatives (greedy: the token is the first of them);
// return_tokens gives the ids.
func TestLlamaCompletionStopProbsTokens(t *testing.T) {
	st := startStack(t, app.Options{})
	full := llamaDo[llamaCompletion](t, st, "/completion", `{"prompt":"Stop here","n_predict":32,"temperature":0,"n_probs":3,"return_tokens":true}`)
	if len(full.Probs) != full.TokensPredicted || len(full.Tokens) != full.TokensPredicted {
		t.Fatalf("%d probs, %d tokens for %d predicted", len(full.Probs), len(full.Tokens), full.TokensPredicted)
	}
	for i, p := range full.Probs {
		if len(p.TopLogprobs) != 3 || p.TopLogprobs[0].ID != p.ID || p.ID != full.Tokens[i] || p.Logprob > 0 ||
			p.TopLogprobs[0].Logprob < p.TopLogprobs[1].Logprob || p.TopLogprobs[1].Logprob < p.TopLogprobs[2].Logprob {
			t.Fatalf("probs[%d] %+v", i, p)
		}
	}
	word := full.Content[len(full.Content)/2:][:3]
	cut := full.Content[:strings.Index(full.Content, word)]
	stopped := llamaDo[llamaCompletion](t, st, "/completion", jsonBody(map[string]any{"prompt": "Stop here", "n_predict": 32, "temperature": 0, "stop": []string{"never appears", word}}))
	if stopped.Content != cut || stopped.StopType != "word" || stopped.StoppingWord != word {
		t.Fatalf("stop %q: %q (%s %q), want %q", word, stopped.Content, stopped.StopType, stopped.StoppingWord, cut)
	}
}

// response_fields keeps only what is named, nested paths flattened under
// their full name (llama.vim reads "timings/prompt_n" at the top level).
func TestLlamaResponseFields(t *testing.T) {
	st := startStack(t, app.Options{})
	got := llamaDo[map[string]json.RawMessage](t, st, "/completion",
		`{"prompt":"Fields","n_predict":4,"temperature":0,"response_fields":["content","timings/predicted_n","generation_settings/n_predict","tokens_cached","no_such_field","timings/nope"]}`)
	want := []string{"content", "generation_settings/n_predict", "timings/predicted_n", "tokens_cached"}
	keys := mapKeysSorted(got)
	if !slices.Equal(keys, want) || string(got["timings/predicted_n"]) != "4" || string(got["generation_settings/n_predict"]) != "4" {
		t.Fatalf("keys %v (%v), want %v", keys, got, want)
	}
}

func mapKeysSorted(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// n_predict 0 evaluates the prompt into the cache and returns at once with
// nothing generated; the next request with that prompt finds it cached.
func TestLlamaWarmupFillsTheCache(t *testing.T) {
	st := startStack(t, app.Options{})
	prompt := strings.Repeat("warm the cache with this sentence. ", 20)
	warm := llamaDo[llamaCompletion](t, st, "/completion", jsonBody(map[string]any{"prompt": prompt, "n_predict": 0}))
	if warm.Content != "" || warm.TokensPredicted != 0 || warm.StopType != "limit" || warm.TokensCached != 0 ||
		warm.Timings.PromptN != warm.TokensEvaluated || warm.Timings.PredictedN != 0 {
		t.Fatalf("warm-up %+v", warm)
	}
	next := llamaDo[llamaCompletion](t, st, "/completion", jsonBody(map[string]any{"prompt": prompt, "n_predict": 4, "temperature": 0}))
	if next.TokensCached < warm.TokensEvaluated-1 || next.Timings.PromptN > 1 || next.TokensPredicted != 4 {
		t.Fatalf("after the warm-up: cached %d of %d, prompt_n %d", next.TokensCached, next.TokensEvaluated, next.Timings.PromptN)
	}
}

// t_max_predict_ms bounds a long generation (at a line end after the
// limit, at twice the limit at most); t_max_prompt_ms ends a request whose
// first token has not come by then, with nothing generated.
func TestLlamaTimeLimits(t *testing.T) {
	st := startStack(t, app.Options{})
	start := time.Now()
	c := llamaDo[llamaCompletion](t, st, "/completion", `{"prompt":"Go on and on","n_predict":3000,"temperature":0,"t_max_predict_ms":30}`)
	took := time.Since(start)
	if c.StopType != "limit" || c.TokensPredicted >= 3000 || c.Timings.PredictedMS > 1000 || took > 5*time.Second {
		t.Fatalf("t_max_predict_ms 30: %s after %d tokens, predicted_ms %v, took %v", c.StopType, c.TokensPredicted, c.Timings.PredictedMS, took)
	}
	if string(c.GenerationSettings["t_max_predict_ms"]) != "30" {
		t.Errorf("generation_settings.t_max_predict_ms %s", c.GenerationSettings["t_max_predict_ms"])
	}
	long := strings.Repeat("a cold prompt that takes a while to prefill ", 200)
	c = llamaDo[llamaCompletion](t, st, "/completion", jsonBody(map[string]any{"prompt": long, "n_predict": 16, "t_max_prompt_ms": 1}))
	if c.Content != "" || c.TokensPredicted != 0 || c.StopType != "limit" {
		t.Fatalf("t_max_prompt_ms 1: %+v", c)
	}
}

// logit_bias (pairs or an object, false = never) changes the greedy
// choice; a fixed seed repeats a sampled completion; ignore_eos and the
// accepted-but-fixed fields do not get in the way.
func TestLlamaBiasSeedAndAcceptedFields(t *testing.T) {
	st := startStack(t, app.Options{})
	first := llamaDo[llamaCompletion](t, st, "/completion", `{"prompt":"Bias","n_predict":1,"temperature":0,"return_tokens":true}`)
	tok := first.Tokens[0]
	for _, bias := range []string{fmt.Sprintf(`[[%d, false]]`, tok), fmt.Sprintf(`{"%d": -100}`, tok)} {
		c := llamaDo[llamaCompletion](t, st, "/completion", `{"prompt":"Bias","n_predict":1,"temperature":0,"return_tokens":true,"logit_bias":`+bias+`}`)
		if c.Tokens[0] == tok {
			t.Errorf("logit_bias %s still chose %d", bias, tok)
		}
	}
	sampled := `{"prompt":"Seeded","n_predict":16,"temperature":1,"seed":42,"samplers":["top_k","top_p","infill"],"cache_prompt":false,"id_slot":3,"ignore_eos":true}`
	a := llamaDo[llamaCompletion](t, st, "/completion", sampled)
	b := llamaDo[llamaCompletion](t, st, "/completion", sampled)
	if a.Content != b.Content || a.TokensPredicted != 16 {
		t.Fatalf("seed 42 twice: %q and %q", a.Content, b.Content)
	}
}

// /tokenize and /detokenize: special-token parsing, pieces, a round trip.
func TestLlamaTokenizeDetokenize(t *testing.T) {
	st := startStack(t, app.Options{})
	const text = "hello <|im_start|> world"
	type pieces struct {
		Tokens []struct {
			ID    engine.Token `json:"id"`
			Piece any          `json:"piece"`
		} `json:"tokens"`
	}
	parsed := llamaTokens(t, st, text, false)
	literal := llamaDo[struct {
		Tokens []engine.Token `json:"tokens"`
	}](t, st, "/tokenize", jsonBody(map[string]any{"content": text, "parse_special": false})).Tokens
	if len(literal) <= len(parsed) {
		t.Errorf("parse_special false gave %d tokens, parsed %d", len(literal), len(parsed))
	}
	p := llamaDo[pieces](t, st, "/tokenize", jsonBody(map[string]any{"content": text, "with_pieces": true}))
	var joined strings.Builder
	for i, tp := range p.Tokens {
		s, ok := tp.Piece.(string)
		if !ok || tp.ID != parsed[i] {
			t.Fatalf("piece %d: %+v", i, tp)
		}
		joined.WriteString(s)
	}
	if joined.String() != text {
		t.Errorf("pieces join to %q", joined.String())
	}
	back := llamaDo[struct {
		Content string `json:"content"`
	}](t, st, "/detokenize", jsonBody(map[string]any{"tokens": parsed}))
	if back.Content != text {
		t.Errorf("detokenized %q", back.Content)
	}
	empty := llamaDo[map[string]json.RawMessage](t, st, "/tokenize", `{"content":""}`)
	if string(empty["tokens"]) != "[]" {
		t.Errorf("empty content: %s", empty["tokens"])
	}
}

// /props reports the defaults and the server; /slots has one entry per
// lane and shows a running request (and fail_on_no_slot answers 200 while
// a lane is free).
func TestLlamaPropsAndSlots(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2})
	props := llamaDo[struct {
		Default struct {
			NCtx   int                        `json:"n_ctx"`
			Params map[string]json.RawMessage `json:"params"`
		} `json:"default_generation_settings"`
		TotalSlots   int             `json:"total_slots"`
		ModelPath    string          `json:"model_path"`
		ChatTemplate string          `json:"chat_template"`
		BuildInfo    string          `json:"build_info"`
		Modalities   map[string]bool `json:"modalities"`
	}](t, st, "/props", "")
	if props.TotalSlots != 2 || props.Default.NCtx != 4096 || props.ModelPath != st.Model.Path || props.ChatTemplate == "" ||
		!strings.HasPrefix(props.BuildInfo, "superfluid") || props.Modalities["vision"] ||
		string(props.Default.Params["temperature"]) != "0.8" || string(props.Default.Params["top_k"]) != "40" {
		t.Fatalf("props %+v", props)
	}
	type slot struct {
		ID           int  `json:"id"`
		NCtx         int  `json:"n_ctx"`
		IsProcessing bool `json:"is_processing"`
	}
	slots := func() []slot { return llamaDo[[]slot](t, st, "/slots?fail_on_no_slot=1", "") }
	if s := slots(); len(s) != 2 || s[0].ID != 0 || s[1].ID != 1 || s[0].NCtx != 4096 || s[0].IsProcessing || s[1].IsProcessing {
		t.Fatalf("idle slots %+v", s)
	}
	resp, err := http.Post(st.URL()+"/completion", "application/json", strings.NewReader(`{"prompt":"busy","n_predict":3000,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(resp.Body).ReadString('\n') // the first event: the lane runs
	busy := 0
	for _, s := range slots() {
		if s.IsProcessing {
			busy++
		}
	}
	resp.Body.Close() // the client leaves: the lane is cancelled
	if busy != 1 {
		t.Fatalf("%d slots busy during one request", busy)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.Sched.Stats().LanesActive != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned stream still holds its lane")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A whole (non-streaming) /completion whose client hangs up is cancelled:
// its lane does not run on to n_predict.
func TestLlamaHangUpCancelsWholeCompletion(t *testing.T) {
	st := startStack(t, app.Options{})
	before := st.Sched.Stats().Cancelled
	conn, err := net.Dial("tcp", st.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"hang up","n_predict":3500,"temperature":0}`
	fmt.Fprintf(conn, "POST /completion HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	deadline := time.Now().Add(10 * time.Second)
	for st.Sched.Stats().LanesActive == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	conn.Close()
	for st.Sched.Stats().Cancelled == before {
		if time.Now().After(deadline) {
			t.Fatal("the hung-up request was not cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// llamaError checks llama.cpp's error shape: {"error": {code, message,
// type}} with code equal to the status.
func llamaError(t *testing.T, status int, body []byte) {
	t.Helper()
	var e struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Code != status || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("not llama.cpp's error shape for %d: %s", status, body)
	}
}

// Bad input to the llama.cpp endpoints: a 4xx in llama.cpp's error shape,
// and the server keeps serving.
func TestLlamaBadInput(t *testing.T) {
	st := startStack(t, app.Options{})
	long := strings.Repeat("lorem ipsum dolor sit amet ", 1200)
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/completion", `{}`, 400},
		{"/completion", `{"prompt":5}`, 400},
		{"/completion", `{"prompt":[]}`, 400},
		{"/completion", `{"prompt":[99999999]}`, 400},
		{"/completion", `{"prompt":[1.5]}`, 400},
		{"/completion", `{"prompt":[{"prompt_string":"x","other":1}]}`, 400},
		{"/completion", `{"prompt":{"prompt_string":"x <__media__>","multimodal_data":["aGk="]}}`, 400}, // no projector
		{"/completion", `{"prompt":"x","n_predict":-2}`, 400},
		{"/completion", `{"prompt":"x","n_predict":1000000000000}`, 400},
		{"/completion", `{"prompt":"x","n_predict":"ten"}`, 400},
		{"/completion", `{"prompt":"x","model":"no-such-model"}`, 404},
		{"/completion", jsonBody(map[string]any{"prompt": long}), 400},
		{"/completion", "{\"prompt\":\"\xff\xfe\"}", 400},
		{"/completion", `{"prompt":"x","n_probs":21}`, 400},
		{"/completion", `{"prompt":"x","logit_bias":[[1]]}`, 400},
		{"/completion", `{"prompt":"x","logit_bias":[[1, 500]]}`, 400},
		{"/completion", `{"prompt":"x","logit_bias":"x"}`, 400},
		{"/completion", `{"prompt":"x","samplers":5}`, 400},
		{"/completion", `{"prompt":"x","samplers":[1]}`, 400},
		{"/completion", `{"prompt":"x","t_max_predict_ms":1000000000000}`, 400},
		{"/completion", `{"prompt":"x","repeat_last_n":-2}`, 400},
		{"/completion", `{"prompt":"x","stream":"yes"}`, 400},
		{"/completion", `{"prompt":"x","top_p":2}`, 400},
		{"/completion", `{"prompt":"x","top_k":-1}`, 400},
		{"/completion", `{"prompt":"x","seed":-5}`, 400},
		{"/completion", `{"prompt":"x","response_fields":"content"}`, 400},
		{"/completion", `{"prompt":"x","stop":5}`, 400},
		{"/completion", `{"prompt":"x"} {}`, 400},
		{"/infill", `{"input_extra":[{"filename":"a.go"}]}`, 400},
		{"/infill", `{"input_extra":"x"}`, 400},
		{"/infill", `{"input_prefix":5}`, 400},
		{"/infill", `{"prompt":[1,2]}`, 400},
		{"/infill", `{"input_prefix":"a","n_predict":-2}`, 400},
		{"/infill", `{"input_prefix":"a","model":"no-such-model"}`, 404},
		{"/tokenize", `{}`, 400},
		{"/tokenize", `{"content":5}`, 400},
		{"/detokenize", `{"tokens":["a"]}`, 400},
		{"/detokenize", `{"tokens":[-1]}`, 400},
		{"/detokenize", `{"tokens":[99999999]}`, 400},
	} {
		status, body := llamaPost(t, st.URL()+c.path, c.body)
		if status != c.status {
			t.Errorf("%s %.80s: %d, want %d: %s", c.path, c.body, status, c.status, body)
			continue
		}
		llamaError(t, status, body)
		if strings.Contains(c.body, "lorem") && !bytes.Contains(body, []byte("context")) {
			t.Errorf("a prompt past the context: %s", body)
		}
	}
	if c := llamaDo[llamaCompletion](t, st, "/completion", `{"prompt":"still there?","n_predict":2}`); c.TokensPredicted != 2 {
		t.Fatalf("after the bad input: %+v", c)
	}
}
