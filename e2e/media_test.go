package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"superfluid/app"
	"superfluid/synth"
)

// Images end to end: the tiny synthetic model served with a synthetic
// vision projector (--mmproj), images sent as llama.cpp's prompt object.

func mmprojFile(t testing.TB) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	if p, ok := modelMemo["mmproj"]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "tiny.mmproj.gguf")
	if err := synth.WriteMMProj(path, synth.MMProjOptions{Shape: s, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	modelMemo["mmproj"] = path
	return path
}

// pngOf is a w×h image whose colours depend on seed, base64.
func pngOf(t testing.TB, w, h int, seed uint8) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x*11) + seed, uint8(y*3) ^ seed, seed * 5, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func imageCompletion(t *testing.T, st *app.Stack, text string, images ...string) llamaCompletion {
	t.Helper()
	body := map[string]any{"prompt": map[string]any{"prompt_string": text, "multimodal_data": images},
		"n_predict": 16, "temperature": 0, "n_probs": 5, "return_tokens": true}
	return llamaDo[llamaCompletion](t, st, "/completion", jsonBody(body))
}

// An image is answered, its rows counted as prompt tokens; the same image
// again is warm past the image and answers the same; another image at
// the same place is cached only up to it and changes the answer.
func TestImageCompletion(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2, MMProj: mmprojFile(t)})
	const text = "Here is a picture: <__media__> Describe it in a few words."
	cat := pngOf(t, 64, 48, 1)
	first := imageCompletion(t, st, text, cat)
	if len(first.Tokens) == 0 {
		t.Fatal("no tokens")
	}
	if first.TokensEvaluated < synth.MMProjImageTokens+8 {
		t.Errorf("tokens_evaluated %d: the image's %d rows are not counted", first.TokensEvaluated, synth.MMProjImageTokens)
	}
	again := imageCompletion(t, st, text, cat)
	if again.TokensCached < synth.MMProjImageTokens {
		t.Errorf("the same image again: %d tokens cached, want past the image's %d rows", again.TokensCached, synth.MMProjImageTokens)
	}
	if ok, why := sameOrNearTie(again, first); !ok {
		t.Errorf("the warm answer differs from the cold one: %s", why)
	}
	dog := imageCompletion(t, st, text, pngOf(t, 64, 48, 200))
	if dog.TokensCached >= synth.MMProjImageTokens {
		t.Errorf("another image: %d tokens cached, want only the text before it", dog.TokensCached)
	}
	if slices.Equal(dog.Tokens, first.Tokens) {
		t.Log("another image gave the same greedy tokens (possible on a random model)")
	}
}

// Greedy output with an image, run beside another request with another
// image, equals its lone run on a fresh server (the near-tie oracle).
func TestImageGreedyEqualsLone(t *testing.T) {
	const text = "Picture <__media__> then words about it"
	imgs := []string{pngOf(t, 40, 40, 3), pngOf(t, 30, 50, 90)}
	lone := make([]llamaCompletion, len(imgs))
	for i, img := range imgs {
		st := startStack(t, app.Options{Lanes: 1, MMProj: mmprojFile(t)})
		lone[i] = imageCompletion(t, st, text, img)
	}
	st := startStack(t, app.Options{Lanes: 2, MMProj: mmprojFile(t)})
	got := make([]llamaCompletion, len(imgs))
	var wg sync.WaitGroup
	for i, img := range imgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = imageCompletion(t, st, text, img)
		}()
	}
	wg.Wait()
	for i := range imgs {
		if ok, why := sameOrNearTie(got[i], lone[i]); !ok {
			t.Errorf("image %d together differs from alone: %s", i, why)
		}
	}
}

// Hostile images are a 400 naming the field, before any decoding; a
// server without a projector refuses images the same way.
func TestImageRefusals(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 1, MMProj: mmprojFile(t)})
	good := pngOf(t, 8, 8, 1)
	raw, _ := base64.StdEncoding.DecodeString(good)
	truncated := base64.StdEncoding.EncodeToString(raw[:len(raw)/2])
	many := make([]string, 33)
	for i := range many {
		many[i] = good
	}
	for _, c := range []struct {
		name   string
		text   string
		images []string
		want   string
	}{
		{"not an image", "a <__media__> b", []string{base64.StdEncoding.EncodeToString([]byte("just some text, not a picture"))}, "magic"},
		{"truncated", "a <__media__> b", []string{truncated}, "truncated"},
		{"not base64", "a <__media__> b", []string{"%%%"}, "base64"},
		{"too many", strings.Repeat("<__media__>", 33) + " b", many, "at most 32"},
		{"markers", "no marker here", []string{good}, "markers"},
		{"ends with the image", "a <__media__>", []string{good}, "ends with an image"},
	} {
		body := map[string]any{"prompt": map[string]any{"prompt_string": c.text, "multimodal_data": c.images}, "n_predict": 2}
		out := string(postJSONTo(t, st, "/completion", body, 400, nil))
		if !strings.Contains(out, c.want) || !strings.Contains(out, "multimodal_data") {
			t.Errorf("%s: %s, want a refusal naming multimodal_data saying %q", c.name, out, c.want)
		}
	}
	// The server still serves.
	if got := imageCompletion(t, st, "a <__media__> b", good); len(got.Tokens) == 0 {
		t.Error("no answer after the refusals")
	}
	plain := startStack(t, app.Options{Lanes: 1})
	body := map[string]any{"prompt": map[string]any{"prompt_string": "a <__media__> b", "multimodal_data": []string{good}}, "n_predict": 2}
	if out := string(postJSONTo(t, plain, "/completion", body, 400, nil)); !strings.Contains(out, "projector") {
		t.Errorf("a model without a projector: %s", out)
	}
}

// A conversation with an image is parked when the server stops and
// restores warm after a restart: its key is the image's digest, not
// anything of the process.
func TestImageParkRestoresAfterRestart(t *testing.T) {
	dir := t.TempDir()
	const text = "Look at this picture <__media__> and tell me about its colours, its shapes and what it may show."
	cat := pngOf(t, 56, 56, 7)
	st := startParkStack(t, app.Options{ParkDir: dir, MMProj: mmprojFile(t)})
	first := imageCompletion(t, st.Stack, text, cat)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if files := parkFiles(t, dir); len(files) == 0 {
		t.Fatal("nothing parked on stop")
	}
	again := startParkStack(t, app.Options{ParkDir: dir, MMProj: mmprojFile(t)})
	warm := imageCompletion(t, again.Stack, text, cat)
	t.Logf("after a restart: %d of %d prompt tokens cached", warm.TokensCached, warm.TokensEvaluated)
	if warm.TokensCached < synth.MMProjImageTokens {
		t.Errorf("after a restart %d tokens cached, want past the image's %d rows", warm.TokensCached, synth.MMProjImageTokens)
	}
	if ok, why := sameOrNearTie(warm, first); !ok {
		t.Errorf("the restored answer differs: %s", why)
	}
	other := imageCompletion(t, again.Stack, text, pngOf(t, 56, 56, 99))
	if other.TokensCached >= synth.MMProjImageTokens {
		t.Errorf("another image after a restart: %d tokens cached", other.TokensCached)
	}
}

// An OpenAI chat with an image_url part (a data URL), through the official
// client: answered, usage counting the image's rows, the same image again
// cached past them with the same answer; n=2 greedy choices both answered
// alike (each choice's job holds the image); a remote URL is a 400.
func TestImageOpenAIChat(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2, MMProj: mmprojFile(t)})
	client := openaiClient(st)
	url := "data:image/png;base64," + pngOf(t, 48, 64, 11)
	params := openai.ChatCompletionNewParams{
		Model: "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is in this picture?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}),
		})},
		MaxCompletionTokens: openai.Int(12),
		Temperature:         openai.Float(0),
	}
	first, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Choices) != 1 || first.Usage.CompletionTokens == 0 {
		t.Fatalf("answer %+v", first)
	}
	if first.Usage.PromptTokens < synth.MMProjImageTokens+5 {
		t.Errorf("prompt_tokens %d: the image's %d rows are not counted", first.Usage.PromptTokens, synth.MMProjImageTokens)
	}
	again, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if again.Usage.PromptTokensDetails.CachedTokens < synth.MMProjImageTokens {
		t.Errorf("the same image again: %d cached tokens, want past its %d rows", again.Usage.PromptTokensDetails.CachedTokens, synth.MMProjImageTokens)
	}
	if again.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("warm %q, cold %q", again.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}
	if acc := streamChat(t, client, params); len(acc.Choices) != 1 || acc.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("streamed: %+v, want %q", acc.Choices, first.Choices[0].Message.Content)
	}
	params.N = openai.Int(2)
	two, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(two.Choices) != 2 || two.Choices[0].Message.Content != first.Choices[0].Message.Content || two.Choices[1].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("n=2: %+v, want both %q", two.Choices, first.Choices[0].Message.Content)
	}
	params.N = openai.Int(1)
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("and this one?"),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/cat.png"}),
	})}
	_, err = client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "--allow-remote-media") {
		t.Errorf("a remote image URL: %v, want a 400 naming the flag that allows remote images", err)
	}
}

// An Anthropic message with an image block (base64 source), through the
// official SDK: answered, usage counting the image's rows, the same image
// again read from the cache with the same answer, count_tokens counting
// the rows; a url source is a 400.
func TestImageAnthropicMessage(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2, MMProj: mmprojFile(t)})
	c := anthropicClient(st)
	msg := anthropic.NewUserMessage(anthropic.NewTextBlock("What does this show?"), anthropic.NewImageBlockBase64("image/png", pngOf(t, 60, 40, 21)))
	params := anthropicGreedy(12, msg)
	first, err := c.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.InputTokens < synth.MMProjImageTokens+5 || first.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v: the image's %d rows are not counted", first.Usage, synth.MMProjImageTokens)
	}
	again, err := c.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if again.Usage.CacheReadInputTokens < synth.MMProjImageTokens {
		t.Errorf("the same image again: %d tokens read from the cache, want past its %d rows", again.Usage.CacheReadInputTokens, synth.MMProjImageTokens)
	}
	if len(again.Content) == 0 || len(first.Content) == 0 || again.Content[0].Text != first.Content[0].Text {
		t.Errorf("warm %+v, cold %+v", again.Content, first.Content)
	}
	count, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "tiny", Messages: []anthropic.MessageParam{msg}})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens < synth.MMProjImageTokens {
		t.Errorf("count_tokens %d", count.InputTokens)
	}
	url := anthropic.NewUserMessage(anthropic.NewTextBlock("and?"), anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/x.png"}))
	_, err = c.Messages.New(context.Background(), anthropicGreedy(4, url))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.RawJSON(), "--allow-remote-media") {
		t.Errorf("a url image source: %v, want a 400 naming the flag that allows remote images", err)
	}
}

// ollamaImageChat is a greedy, whole /api/chat with images on the user
// message.
type ollamaImageReply struct {
	Message struct {
		Content string `json:"content"`
	} `json:"message"`
	PromptEvalCount int `json:"prompt_eval_count"`
	EvalCount       int `json:"eval_count"`
}

// An Ollama chat with images (base64 on the user message): answered, the
// image's rows counted in prompt_eval_count, the same answer again; a bad
// image is a 400 naming messages.
func TestImageOllamaChat(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2, MMProj: mmprojFile(t)})
	body := func(img string) map[string]any {
		return map[string]any{"model": "tiny", "stream": false, "options": map[string]any{"temperature": 0, "num_predict": 10},
			"messages": []map[string]any{{"role": "user", "content": "What is this?", "images": []string{img}}}}
	}
	img := pngOf(t, 50, 50, 33)
	var first, again ollamaImageReply
	postJSONTo(t, st, "/api/chat", body(img), 200, &first)
	if first.PromptEvalCount < synth.MMProjImageTokens+3 || first.EvalCount == 0 {
		t.Errorf("reply %+v: the image's %d rows are not counted", first, synth.MMProjImageTokens)
	}
	postJSONTo(t, st, "/api/chat", body(img), 200, &again)
	if again.Message.Content != first.Message.Content {
		t.Errorf("again %q, first %q", again.Message.Content, first.Message.Content)
	}
	out := string(postJSONTo(t, st, "/api/chat", body(base64.StdEncoding.EncodeToString([]byte("<html>not an image</html>"))), 400, nil))
	if !strings.Contains(out, "magic") {
		t.Errorf("not an image: %s", out)
	}
}

// Ollama's /api/generate with images: answered with the rows counted, and
// no "context" (its tokens would stand for placeholders, not the image);
// images with raw are a 400 naming images.
func TestImageOllamaGenerate(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 1, MMProj: mmprojFile(t)})
	img := pngOf(t, 32, 32, 44)
	var out struct {
		Response        string `json:"response"`
		PromptEvalCount int    `json:"prompt_eval_count"`
		Context         []int  `json:"context"`
	}
	postJSONTo(t, st, "/api/generate", map[string]any{"model": "tiny", "stream": false, "prompt": "Describe it.", "images": []string{img},
		"options": map[string]any{"temperature": 0, "num_predict": 8}}, 200, &out)
	if out.PromptEvalCount < synth.MMProjImageTokens || out.Response == "" || len(out.Context) != 0 {
		t.Errorf("generate with an image: %+v", out)
	}
	raw := string(postJSONTo(t, st, "/api/generate", map[string]any{"model": "tiny", "prompt": "x", "raw": true, "images": []string{img}}, 400, nil))
	if !strings.Contains(raw, "images") {
		t.Errorf("raw with images: %s", raw)
	}
}
