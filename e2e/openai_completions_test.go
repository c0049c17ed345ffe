package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"superfluid/app"
)

// OpenAI's legacy /v1/completions over a real socket, through the official
// Go client where it can express the request and raw HTTP elsewhere.

// completionsClient is the official client pointed at st, retries off.
func completionsClient(st *app.Stack) openai.Client {
	return openai.NewClient(option.WithBaseURL(st.URL()+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// oaiCompletionBody is a raw /v1/completions answer or chunk.
type oaiCompletionBody struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text         string  `json:"text"`
		Index        int     `json:"index"`
		FinishReason *string `json:"finish_reason"`
		Logprobs     *struct {
			Tokens        []string             `json:"tokens"`
			TokenLogprobs []float64            `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			TextOffset    []int                `json:"text_offset"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// The official client, whole and streamed: default max_tokens 16, the
// stream adds up to the whole text, usage arrives when asked.
func TestCompletionsOfficialClient(t *testing.T) {
	st := startStack(t, app.Options{})
	client := completionsClient(st)
	params := openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel("tiny"),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Write a poem about the sea")},
		Temperature: openai.Float(0),
	}
	whole, err := client.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Object != "text_completion" || !strings.HasPrefix(whole.ID, "cmpl-") || len(whole.Choices) != 1 ||
		whole.Usage.CompletionTokens != 16 || whole.Choices[0].FinishReason != "length" || whole.Choices[0].Text == "" ||
		whole.Usage.TotalTokens != whole.Usage.PromptTokens+16 {
		t.Fatalf("whole: %s", whole.RawJSON())
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Completions.NewStreaming(context.Background(), params)
	var text strings.Builder
	finish, usage := "", int64(0)
	for stream.Next() {
		c := stream.Current()
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
		if c.Usage.CompletionTokens > 0 {
			usage = c.Usage.CompletionTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != whole.Choices[0].Text || finish != "length" || usage != 16 {
		t.Fatalf("streamed %q (%s, usage %d), whole %q", text.String(), finish, usage, whole.Choices[0].Text)
	}
}

// Raw SSE: text_completion chunks, a finish chunk, the usage chunk with no
// choices, then data: [DONE].
func TestCompletionsStreamShape(t *testing.T) {
	st := startStack(t, app.Options{})
	resp, err := http.Post(st.URL()+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"tiny","prompt":"Count","max_tokens":6,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var chunks []oaiCompletionBody
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if done {
			t.Fatalf("after [DONE]: %q", line)
		}
		if line == "data: [DONE]" {
			done = true
			continue
		}
		var c oaiCompletionBody
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil || c.Object != "text_completion" {
			t.Fatalf("chunk %q: %v", line, err)
		}
		chunks = append(chunks, c)
	}
	n := len(chunks)
	if !done || n < 3 || len(chunks[n-1].Choices) != 0 || chunks[n-1].Usage == nil || chunks[n-1].Usage.CompletionTokens != 6 ||
		chunks[n-2].Choices[0].FinishReason == nil || *chunks[n-2].Choices[0].FinishReason != "length" ||
		chunks[0].Choices[0].FinishReason != nil || chunks[0].Usage != nil {
		t.Fatalf("%d chunks, done %v: %+v", n, done, chunks)
	}
}

// Several prompts (text or token ids) × n: one choice per pair, indexed in
// order; each is that prompt's answer alone. The choices run as lanes beside
// each other, so "alone" is through the near-tie oracle (sameGreedyAnswer),
// never byte for byte: every request asks for its top-5 alternatives.
func TestCompletionsPromptsTimesN(t *testing.T) {
	st := startStack(t, app.Options{})
	post := func(body map[string]any) []byte {
		t.Helper()
		body["max_tokens"], body["temperature"], body["logprobs"] = 8, 0, 5
		status, b := llamaPost(t, st.URL()+"/v1/completions", jsonBody(body))
		if status != 200 {
			t.Fatalf("%v: %d %s", body, status, b)
		}
		return b
	}
	a, b := post(map[string]any{"prompt": "alpha"}), post(map[string]any{"prompt": "beta"})
	idsA, idsB := llamaTokens(t, st, "alpha", true), llamaTokens(t, st, "beta", true)
	expectAloneAnswer := func(what string, got, alone []byte) {
		t.Helper()
		if tied, bad := sameGreedyAnswer(t, got, alone); bad != "" {
			t.Errorf("%s: differs from the prompt alone: %s", what, bad)
		} else if tied {
			t.Logf("%s: took a near-tie the other way", what)
		}
	}
	for _, prompt := range []any{[]string{"alpha", "beta"}, [][]int32{toInt32(idsA), toInt32(idsB)}} {
		raw := post(map[string]any{"prompt": prompt, "n": 2})
		var got oaiCompletionBody
		var choices struct{ Choices []json.RawMessage }
		if json.Unmarshal(raw, &got) != nil || json.Unmarshal(raw, &choices) != nil {
			t.Fatalf("%v: %s", prompt, raw)
		}
		if len(got.Choices) != 4 || got.Usage.CompletionTokens != 32 || got.Usage.PromptTokens != len(idsA)+len(idsB) {
			t.Fatalf("%v: %+v", prompt, got)
		}
		for i, c := range got.Choices {
			if c.Index != i {
				t.Errorf("%v: choice %d has index %d", prompt, i, c.Index)
			}
			one := []byte(`{"choices":[` + string(choices.Choices[i]) + `]}`)
			expectAloneAnswer(fmt.Sprintf("%v: choice %d", prompt, i), one, [][]byte{a, a, b, b}[i])
		}
	}
	expectAloneAnswer("token-id prompt", post(map[string]any{"prompt": idsA}), a)
}

func toInt32[T ~int32](s []T) []int32 {
	out := make([]int32, len(s))
	for i, v := range s {
		out[i] = int32(v)
	}
	return out
}

// logprobs in the legacy shape; echo prepends the prompt; stop cuts; a
// seed repeats a sampled completion; max_tokens 0 with echo returns the
// prompt alone.
func TestCompletionsLogprobsEchoStopSeed(t *testing.T) {
	st := startStack(t, app.Options{})
	lp := llamaDo[oaiCompletionBody](t, st, "/v1/completions", `{"prompt":"Probabilities","max_tokens":10,"temperature":0,"logprobs":2}`)
	c := lp.Choices[0]
	l := c.Logprobs
	if l == nil || len(l.Tokens) != 10 || len(l.TokenLogprobs) != 10 || len(l.TopLogprobs) != 10 || len(l.TextOffset) != 10 || l.TextOffset[0] != 0 {
		t.Fatalf("logprobs %+v", l)
	}
	for i, tok := range l.Tokens {
		top, ok := l.TopLogprobs[i][tok]
		if !ok || len(l.TopLogprobs[i]) > 3 || top != l.TokenLogprobs[i] || l.TokenLogprobs[i] > 0 || (i > 0 && l.TextOffset[i] < l.TextOffset[i-1]) {
			t.Fatalf("token %d %q: top %v, logprob %v, offsets %v", i, tok, l.TopLogprobs[i], l.TokenLogprobs[i], l.TextOffset)
		}
	}
	if strings.Join(l.Tokens, "") != c.Text {
		t.Errorf("tokens %q do not spell %q", l.Tokens, c.Text)
	}
	echo := llamaDo[oaiCompletionBody](t, st, "/v1/completions", `{"prompt":"Probabilities","max_tokens":10,"temperature":0,"echo":true}`)
	if echo.Choices[0].Text != "Probabilities"+c.Text {
		t.Errorf("echo %q", echo.Choices[0].Text)
	}
	only := llamaDo[oaiCompletionBody](t, st, "/v1/completions", `{"prompt":"Probabilities","max_tokens":0,"echo":true}`)
	if only.Choices[0].Text != "Probabilities" || only.Usage.CompletionTokens != 0 || *only.Choices[0].FinishReason != "length" {
		t.Errorf("max_tokens 0: %+v", only)
	}
	word := c.Text[len(c.Text)/2:][:2]
	stopped := llamaDo[oaiCompletionBody](t, st, "/v1/completions", jsonBody(map[string]any{"prompt": "Probabilities", "max_tokens": 10, "temperature": 0, "stop": word}))
	if want := c.Text[:strings.Index(c.Text, word)]; stopped.Choices[0].Text != want || *stopped.Choices[0].FinishReason != "stop" {
		t.Errorf("stop %q: %q, want %q", word, stopped.Choices[0].Text, want)
	}
	seeded := `{"prompt":"Seeded","max_tokens":12,"temperature":1,"seed":7,"user":"someone"}`
	x := llamaDo[oaiCompletionBody](t, st, "/v1/completions", seeded)
	y := llamaDo[oaiCompletionBody](t, st, "/v1/completions", seeded)
	if x.Choices[0].Text != y.Choices[0].Text {
		t.Errorf("seed 7 twice: %q and %q", x.Choices[0].Text, y.Choices[0].Text)
	}
}

// suffix fills in the middle: the same FIM prompt /infill builds, so the
// greedy texts agree, and the prompt is longer than the prefix alone.
func TestCompletionsSuffixIsFIM(t *testing.T) {
	st := startStack(t, app.Options{})
	client := completionsClient(st)
	got, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel("tiny"),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("def add(a, b):\n    ")},
		Suffix:      openai.String("\n\nprint(add(1, 2))\n"),
		MaxTokens:   openai.Int(12),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	infill := llamaDo[llamaCompletion](t, st, "/infill", `{"input_prefix":"def add(a, b):\n    ","input_suffix":"\n\nprint(add(1, 2))\n","n_predict":12,"temperature":0}`)
	plain := len(llamaTokens(t, st, "def add(a, b):\n    ", true))
	if got.Choices[0].Text != infill.Content || int(got.Usage.PromptTokens) != infill.TokensEvaluated || int(got.Usage.PromptTokens) <= plain {
		t.Fatalf("suffix: %q (%d prompt tokens); /infill %q (%d)", got.Choices[0].Text, got.Usage.PromptTokens, infill.Content, infill.TokensEvaluated)
	}
}

// oaiError checks OpenAI's error shape and returns the param it names.
func oaiError(t *testing.T, body []byte) (param string) {
	t.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("not OpenAI's error shape: %s", body)
		return ""
	}
	if e.Error.Param != nil {
		return *e.Error.Param
	}
	return ""
}

// Bad input to /v1/completions: a 4xx in OpenAI's shape naming the field,
// and the server keeps serving.
func TestCompletionsBadInput(t *testing.T) {
	st := startStack(t, app.Options{})
	for _, c := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"model":"tiny"}`, 400, "prompt"},
		{`{"prompt":5}`, 400, "prompt"},
		{`{"prompt":[1.5]}`, 400, "prompt"},
		{`{"prompt":[99999999]}`, 400, "prompt"},
		{`{"prompt":"x","max_tokens":-2}`, 400, "max_tokens"},
		{`{"prompt":"x","max_tokens":1000000000000}`, 400, "max_tokens"},
		{`{"prompt":"x","max_tokens":"ten"}`, 400, "max_tokens"},
		{`{"prompt":"x","n":0}`, 400, "n"},
		{`{"prompt":"x","best_of":2}`, 400, "best_of"},
		{`{"prompt":"x","echo":true,"logprobs":1}`, 400, "echo"},
		{`{"prompt":"x","logprobs":6}`, 400, "logprobs"},
		{`{"prompt":[1,2],"suffix":"y"}`, 400, "suffix"},
		{`{"prompt":"x","temperature":-1}`, 400, "temperature"},
		{`{"prompt":"x","logit_bias":{"word":1}}`, 400, "logit_bias"},
		{`{"prompt":"x","stop":5}`, 400, "stop"},
		{`{"prompt":"x","model":"no-such-model"}`, 404, ""},
		{jsonBody(map[string]any{"prompt": strings.Repeat("lorem ipsum dolor sit amet ", 1200)}), 400, ""},
		{"{\"prompt\":\"\xff\"}", 400, ""},
		{`{"prompt":["a","b"],"n":100}`, 400, "n"},
	} {
		status, body := llamaPost(t, st.URL()+"/v1/completions", c.body)
		if status != c.status {
			t.Errorf("%.80s: %d, want %d: %s", c.body, status, c.status, body)
			continue
		}
		if p := oaiError(t, body); c.param != "" && p != c.param {
			t.Errorf("%.80s: param %q, want %q: %s", c.body, p, c.param, body)
		}
		if strings.Contains(c.body, "lorem") && !strings.Contains(string(body), "context_length_exceeded") {
			t.Errorf("a prompt past the context: %s", body)
		}
	}
	got := llamaDo[oaiCompletionBody](t, st, "/v1/completions", `{"prompt":"still there?","max_tokens":2}`)
	if got.Usage.CompletionTokens != 2 || !slices.Contains([]string{"length", "stop"}, *got.Choices[0].FinishReason) {
		t.Fatalf("after the bad input: %+v", got)
	}
}
