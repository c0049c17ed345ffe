package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"superfluid/app"
	"superfluid/cgo"
	"superfluid/chat"
	"superfluid/engine"
)

// The official OpenAI Go client is the reference for "field for field": if
// it cannot decode a response, or its stream accumulator rejects a chunk,
// the server is wrong no matter what our own structs accept.

// openaiClient talks to st the way an application pointed at a local
// server does. Retries are off so that an error surfaces once, as sent.
func openaiClient(st *app.Stack, opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(st.URL() + "/v1/"),
		option.WithAPIKey("not-checked"),
		option.WithMaxRetries(0),
	}
	return openai.NewClient(append(base, opts...)...)
}

// greedyChat is a greedy chat request for the tiny model.
func greedyChat(prompt string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:               "tiny",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxCompletionTokens: openai.Int(maxTokens),
		Temperature:         openai.Float(0),
	}
}

// streamChat runs params through NewStreaming and the client's own
// accumulator, failing on any chunk the accumulator refuses.
func streamChat(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams) openai.ChatCompletionAccumulator {
	t.Helper()
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		chunks++
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused chunk %d: %s", chunks, stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if chunks == 0 {
		t.Fatal("the stream carried no chunk")
	}
	return acc
}

// directGreedy generates from prompt on an engine of its own, one lane,
// tick by tick, with no scheduler or cache (as `superfluid run` did before
// it ran on the request core): the reference the server's continuous
// batching must not change for a greedy request.
func directGreedy(t *testing.T, modelPath string, prompt []engine.Token, maxTokens int) string {
	t.Helper()
	e, err := cgo.Open(cgo.Options{ModelPath: modelPath, Ctx: 4096, Lanes: 1, Seqs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	desc := e.Descriptor()
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: 1, Seq: 0, MaxTokens: uint32(maxTokens), Sampling: engine.Greedy()}, prompt, nil)
	var (
		text       engine.TextStream
		out, piece []byte
	)
	for done := 0; ; {
		if done < len(prompt) {
			n := min(desc.Batch, len(prompt)-done)
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: 1, Offset: uint32(done), Count: uint32(n)})
			done += n
		} else {
			p.Decodes = append(p.Decodes, engine.Decode{Lane: 1})
		}
		ev, err := e.Tick(&p)
		if err != nil {
			t.Fatal(err)
		}
		p.Reset()
		for _, te := range ev.Tokens {
			if !desc.IsEOG(te.Token) {
				piece = e.AppendPiece(piece[:0], te.Token, false)
				out = text.Push(out, piece)
			}
			if te.Finish != engine.FinishNone {
				return string(text.Flush(out))
			}
		}
	}
}

// renderedPrompt is the prompt tokens the server builds for one user
// message: the model's chat template, then the tokenizer with its BOS rule.
func renderedPrompt(t *testing.T, st *app.Stack, user string) []engine.Token {
	t.Helper()
	text, err := st.Model.Chat.Render([]chat.Message{{Role: chat.RoleUser, Content: user}}, true)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := st.Model.Text.Tokenize(text, st.Model.Desc.AddBOS, true)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// rawChatContent posts body to /v1/chat/completions and returns the first
// choice's content.
func rawChatContent(t *testing.T, st *app.Stack, body string) string {
	t.Helper()
	resp, err := http.Post(st.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("raw chat: status %d, err %v, %+v", resp.StatusCode, err, out)
	}
	return out.Choices[0].Message.Content
}

// A greedy answer is one answer: the client's New, the client's streaming
// accumulator, raw HTTP and a single-lane engine run of the same rendered
// prompt all produce the same text, and usage counts what was generated.
func TestOpenAIClientGreedyAgreesEverywhere(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	const prompt, n = "Write a haiku about the sea.", 40
	params := greedyChat(prompt, n)

	whole, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Choices) != 1 || whole.Object != "chat.completion" || whole.Model != "tiny" || whole.ID == "" {
		t.Fatalf("response: %s", whole.RawJSON())
	}
	got := whole.Choices[0].Message.Content
	if whole.Choices[0].FinishReason != "length" || whole.Usage.CompletionTokens != n || got == "" {
		t.Fatalf("finish %q, usage %+v, content %q", whole.Choices[0].FinishReason, whole.Usage, got)
	}
	prompted := renderedPrompt(t, st, prompt)
	if whole.Usage.PromptTokens != int64(len(prompted)) || whole.Usage.TotalTokens != int64(len(prompted))+n {
		t.Errorf("usage %+v for a prompt of %d tokens", whole.Usage, len(prompted))
	}

	params.StreamOptions.IncludeUsage = openai.Bool(true)
	acc := streamChat(t, client, params)
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != got || acc.Choices[0].FinishReason != "length" {
		t.Errorf("streamed %+v, whole %q", acc.Choices, got)
	}
	if acc.Usage.CompletionTokens != n || acc.Usage.PromptTokens != whole.Usage.PromptTokens {
		t.Errorf("streamed usage %+v, whole %+v", acc.Usage, whole.Usage)
	}

	raw := rawChatContent(t, st, `{"model":"tiny","messages":[{"role":"user","content":"Write a haiku about the sea."}],"max_tokens":40,"temperature":0}`)
	if raw != got {
		t.Errorf("raw HTTP %q, client %q", raw, got)
	}
	if direct := directGreedy(t, st.Model.Path, prompted, n); direct != got {
		t.Errorf("single-lane engine %q, server %q", direct, got)
	}
}

// n choices with a seed: each choice samples with its own seed, so the two
// differ, the same request gives the same two again, and streaming them
// interleaved gives what the whole response gave.
func TestOpenAIClientNChoicesSeeded(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	params := openai.ChatCompletionNewParams{
		Model:               "tiny",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxCompletionTokens: openai.Int(24),
		Temperature:         openai.Float(1.5),
		Seed:                openai.Int(7),
		N:                   openai.Int(2),
	}
	first, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Choices) != 2 || len(second.Choices) != 2 {
		t.Fatalf("choices: %d and %d", len(first.Choices), len(second.Choices))
	}
	for i, c := range first.Choices {
		if c.Index != int64(i) || c.Message.Content != second.Choices[i].Message.Content {
			t.Errorf("choice %d: index %d, %q then %q", i, c.Index, c.Message.Content, second.Choices[i].Message.Content)
		}
	}
	if first.Choices[0].Message.Content == first.Choices[1].Message.Content {
		t.Errorf("both choices sampled the same text %q: the per-choice seed is not applied", first.Choices[0].Message.Content)
	}
	if first.Usage.CompletionTokens != 48 {
		t.Errorf("usage %+v: want 48 completion tokens over two choices", first.Usage)
	}
	acc := streamChat(t, client, params)
	if len(acc.Choices) != 2 {
		t.Fatalf("streamed %d choices", len(acc.Choices))
	}
	for i := range 2 {
		if acc.Choices[i].Message.Content != first.Choices[i].Message.Content {
			t.Errorf("choice %d streamed %q, whole %q", i, acc.Choices[i].Message.Content, first.Choices[i].Message.Content)
		}
	}
}

// A stop string ends the answer just before it, in both forms, with
// finish_reason "stop"; the stop string itself is never shown.
func TestOpenAIClientStop(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	free, err := client.Chat.Completions.New(context.Background(), greedyChat("hello", 48))
	if err != nil {
		t.Fatal(err)
	}
	text := free.Choices[0].Message.Content
	// A stop string from the middle of what the model says anyway (whole
	// characters, so that it survives JSON).
	runes := []rune(text)
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	want := text[:strings.Index(text, stop)]
	params := greedyChat("hello", 48)
	params.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"never said by it", stop}}
	whole, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if c := whole.Choices[0]; c.Message.Content != want || c.FinishReason != "stop" {
		t.Errorf("stop %q: got %q (%s), want %q (stop)", stop, c.Message.Content, c.FinishReason, want)
	}
	acc := streamChat(t, client, params)
	if c := acc.Choices[0]; c.Message.Content != want || c.FinishReason != "stop" {
		t.Errorf("streamed with stop %q: got %q (%s), want %q", stop, c.Message.Content, c.FinishReason, want)
	}
}

// logprobs with top_logprobs: one entry per generated token whose bytes
// rebuild the content, each with the asked number of alternatives; for a
// greedy answer the sampled token is the most likely one.
func TestOpenAIClientLogprobs(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	params := greedyChat("hello", 12)
	params.Logprobs = openai.Bool(true)
	params.TopLogprobs = openai.Int(3)
	whole, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	c := whole.Choices[0]
	checkLogprobs(t, "whole", c.Message.Content, c.Logprobs.Content)
	acc := streamChat(t, client, params)
	if len(acc.Choices) != 1 {
		t.Fatalf("streamed %d choices", len(acc.Choices))
	}
	checkLogprobs(t, "streamed", acc.Choices[0].Message.Content, acc.Choices[0].Logprobs.Content)
	if len(acc.Choices[0].Logprobs.Content) != len(c.Logprobs.Content) {
		t.Errorf("streamed %d logprob entries, whole %d", len(acc.Choices[0].Logprobs.Content), len(c.Logprobs.Content))
	}
}

func checkLogprobs(t *testing.T, what, content string, lps []openai.ChatCompletionTokenLogprob) {
	t.Helper()
	if len(lps) != 12 {
		t.Fatalf("%s: %d logprob entries for 12 tokens", what, len(lps))
	}
	var rebuilt []byte
	for i, lp := range lps {
		for _, b := range lp.Bytes {
			rebuilt = append(rebuilt, byte(b))
		}
		if len(lp.TopLogprobs) != 3 {
			t.Errorf("%s: token %d has %d alternatives, want 3", what, i, len(lp.TopLogprobs))
			continue
		}
		if lp.Logprob > 0 || lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[0].Logprob != lp.Logprob {
			t.Errorf("%s: greedy token %d %q (%v) is not the top alternative %+v", what, i, lp.Token, lp.Logprob, lp.TopLogprobs[0])
		}
		for k := 1; k < len(lp.TopLogprobs); k++ {
			if lp.TopLogprobs[k].Logprob > lp.TopLogprobs[k-1].Logprob {
				t.Errorf("%s: token %d alternatives out of order: %+v", what, i, lp.TopLogprobs)
			}
		}
	}
	if string(rebuilt) != content {
		t.Errorf("%s: logprob bytes rebuild %q, content %q", what, rebuilt, content)
	}
}

// Models.List shows the one model under its alias; an unknown model name is
// the client's *openai.Error with status 404 and code model_not_found.
func TestOpenAIClientModelsAndErrors(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "tiny" || page.Data[0].Object != "model" {
		t.Fatalf("models: %s", page.RawJSON())
	}
	params := greedyChat("hello", 4)
	params.Model = "gpt-nonexistent"
	_, err = client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("unknown model: %v", err)
	}
	if apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Message == "" {
		t.Errorf("unknown model: status %d code %q message %q", apiErr.StatusCode, apiErr.Code, apiErr.Message)
	}
	params = greedyChat("hello", 4)
	params.TopP = openai.Float(2)
	_, err = client.Chat.Completions.New(context.Background(), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "top_p" || apiErr.Type != "invalid_request_error" {
		t.Errorf("top_p 2: %v", err)
	}
}

// The legacy completions API through the official client: a greedy
// completion is the same whole, streamed, and from a single-lane engine
// run of the same prompt tokens (what `superfluid run` does); with a
// suffix (fill in the middle) whole and streamed agree too.
func TestOpenAIClientCompletions(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	const prompt, n = "func main() {", 24
	params := openai.CompletionNewParams{
		Model:       "tiny",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(n),
		Temperature: openai.Float(0),
	}
	for _, suffix := range []string{"", "\n}\n"} {
		if suffix != "" {
			params.Suffix = openai.String(suffix)
		}
		whole, err := client.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if len(whole.Choices) != 1 || whole.Choices[0].FinishReason != "length" || whole.Usage.CompletionTokens != n {
			t.Fatalf("suffix %q: %s", suffix, whole.RawJSON())
		}
		stream := client.Completions.NewStreaming(context.Background(), params)
		var streamed strings.Builder
		for stream.Next() {
			for _, c := range stream.Current().Choices {
				streamed.WriteString(c.Text)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		if got := whole.Choices[0].Text; streamed.String() != got {
			t.Errorf("suffix %q: streamed %q, whole %q", suffix, streamed.String(), got)
		}
		if suffix != "" {
			continue
		}
		toks, err := st.Model.Text.Tokenize(prompt, st.Model.Desc.AddBOS, true)
		if err != nil {
			t.Fatal(err)
		}
		if whole.Usage.PromptTokens != int64(len(toks)) {
			t.Errorf("usage counts %d prompt tokens, the tokenizer %d", whole.Usage.PromptTokens, len(toks))
		}
		if direct := directGreedy(t, st.Model.Path, toks, n); direct != whole.Choices[0].Text {
			t.Errorf("single-lane engine %q, server %q", direct, whole.Choices[0].Text)
		}
	}
}
