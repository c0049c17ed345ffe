package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"superfluid/app"
	"superfluid/media/mediatest"
	"superfluid/synth"
)

// Audio end to end: the tiny synthetic model served with a synthetic
// projector carrying both encoders (model synth --mmproj-modality both),
// audio sent as OpenAI input_audio parts, llama.cpp's multimodal_data and
// transcription uploads.

func audioProjFile(t testing.TB) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	if p, ok := modelMemo["mmproj-both"]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, "tiny.both.mmproj.gguf")
	if err := synth.WriteMMProj(path, synth.MMProjOptions{Shape: s, Seed: 5, Modality: synth.ModalityBoth}); err != nil {
		t.Fatal(err)
	}
	modelMemo["mmproj-both"] = path
	return path
}

// testMP3 is llama.cpp's own test MP3, or a skip saying it is absent.
func testMP3(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("/work/shared/llama.cpp/tools/mtmd/test-2.mp3")
	if err != nil {
		t.Skipf("the shared llama.cpp tree's tools/mtmd/test-2.mp3 is not here (../shared absent?): %v", err)
	}
	return b
}

func sineB64(seconds, hz float64) string {
	return base64.StdEncoding.EncodeToString(mediatest.SineWAV(seconds, hz, 16000))
}

func audioChatParams(b64 string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model: "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What do you hear?"),
			openai.InputAudioContentPart(openai.ChatCompletionContentPartInputAudioInputAudioParam{Data: b64, Format: "wav"}),
			openai.TextContentPart("Answer briefly."),
		})},
		MaxCompletionTokens: openai.Int(10),
		Temperature:         openai.Float(0),
	}
}

// An OpenAI chat with an input_audio part, through the official client:
// answered, usage counting the audio's rows (one 30-second window), the
// same audio again cached past them with the same answer.
func TestAudioOpenAIChat(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2, MMProj: audioProjFile(t)})
	var props struct {
		Modalities map[string]bool `json:"modalities"`
	}
	getJSON(t, st.URL()+"/props", &props)
	if !props.Modalities["audio"] || !props.Modalities["vision"] {
		t.Errorf("/props modalities %v, want audio and vision", props.Modalities)
	}
	var show struct {
		Capabilities []string `json:"capabilities"`
	}
	postJSONTo(t, st, "/api/show", map[string]any{"model": "tiny"}, 200, &show)
	if !slices.Contains(show.Capabilities, "audio") || !slices.Contains(show.Capabilities, "vision") {
		t.Errorf("/api/show capabilities %v, want audio and vision", show.Capabilities)
	}
	client := openaiClient(st)
	params := audioChatParams(sineB64(2, 440))
	first, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Choices) != 1 || first.Usage.CompletionTokens == 0 {
		t.Fatalf("answer %+v", first)
	}
	if first.Usage.PromptTokens < synth.MMProjAudioTokens+5 {
		t.Errorf("prompt_tokens %d: the audio's %d rows are not counted", first.Usage.PromptTokens, synth.MMProjAudioTokens)
	}
	again, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("again: %d of %d prompt tokens cached", again.Usage.PromptTokensDetails.CachedTokens, again.Usage.PromptTokens)
	if again.Usage.PromptTokensDetails.CachedTokens < synth.MMProjAudioTokens {
		t.Errorf("the same audio again: %d cached tokens, want past its %d rows", again.Usage.PromptTokensDetails.CachedTokens, synth.MMProjAudioTokens)
	}
	if again.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("warm %q, cold %q", again.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}
	other, err := client.Chat.Completions.New(context.Background(), audioChatParams(sineB64(2, 880)))
	if err != nil {
		t.Fatal(err)
	}
	if other.Usage.PromptTokensDetails.CachedTokens >= synth.MMProjAudioTokens {
		t.Errorf("other audio: %d cached tokens, want only the text before it", other.Usage.PromptTokensDetails.CachedTokens)
	}
}

// Audio longer than one window is a window of rows each; the same long
// audio again is cached through both windows (each keyed on its own).
func TestAudioTwoWindows(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 1, MMProj: audioProjFile(t)})
	const text = "Hear <__media__> and say"
	long := sineB64(40, 300)
	first := imageCompletion(t, st, text, long)
	if first.TokensEvaluated < 2*synth.MMProjAudioTokens {
		t.Fatalf("tokens_evaluated %d: want both windows' %d rows", first.TokensEvaluated, 2*synth.MMProjAudioTokens)
	}
	again := imageCompletion(t, st, text, long)
	if again.TokensCached < 2*synth.MMProjAudioTokens {
		t.Errorf("again: %d cached, want past both windows", again.TokensCached)
	}
	if ok, why := sameOrNearTie(again, first); !ok {
		t.Errorf("warm differs: %s", why)
	}
}

// Greedy output with audio, run beside another request with other audio,
// equals its lone run on a fresh server (the near-tie oracle); the MP3
// test file takes the same path as a WAV.
func TestAudioGreedyEqualsLone(t *testing.T) {
	const text = "Sound <__media__> then words about it"
	clips := []string{sineB64(1.5, 500), base64.StdEncoding.EncodeToString(testMP3(t))}
	lone := make([]llamaCompletion, len(clips))
	for i, c := range clips {
		st := startStack(t, app.Options{Lanes: 1, MMProj: audioProjFile(t)})
		lone[i] = imageCompletion(t, st, text, c)
	}
	st := startStack(t, app.Options{Lanes: 2, MMProj: audioProjFile(t)})
	got := make([]llamaCompletion, len(clips))
	var wg sync.WaitGroup
	for i, c := range clips {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = imageCompletion(t, st, text, c)
		}()
	}
	wg.Wait()
	for i := range clips {
		if ok, why := sameOrNearTie(got[i], lone[i]); !ok {
			t.Errorf("clip %d together differs from alone: %s", i, why)
		}
	}
}

// Hostile audio is a 400 naming the field, before any decoding, on
// llama.cpp's multimodal_data and OpenAI's input_audio; a model whose
// projector has no audio encoder refuses audio the same way; the server
// keeps serving.
func TestAudioRefusals(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 1, MMProj: audioProjFile(t)})
	wav := mediatest.SineWAV(1, 440, 16000)
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	long := mediatest.WAV(make([]int16, 31*60*1000), 1000, 1)
	lying := append([]byte(nil), wav...)
	lying[40], lying[41], lying[42], lying[43] = 0xff, 0xff, 0xff, 0x7f
	many := make([]string, 9)
	for i := range many {
		many[i] = b64(wav)
	}
	for _, c := range []struct {
		name  string
		text  string
		files []string
		want  string
	}{
		{"truncated", "a <__media__> b", []string{b64(wav[:len(wav)/3])}, "truncated"},
		{"declares 2 GB", "a <__media__> b", []string{b64(lying)}, "truncated"},
		{"hours long", "a <__media__> b", []string{b64(long)}, "at most 30m0s"},
		{"ogg", "a <__media__> b", []string{b64([]byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00 and more"))}, "magic"},
		{"too many", strings.Repeat("<__media__>", 9) + " b", many, "at most 8"},
		{"too short to hear", "a <__media__> b", []string{b64(mediatest.WAV(make([]int16, 20), 16000, 1))}, "samples"},
		{"windows past the context", "a <__media__> b", []string{b64(mediatest.WAV(make([]int16, 28*60*1000), 1000, 1))}, "past the context"},
	} {
		body := map[string]any{"prompt": map[string]any{"prompt_string": c.text, "multimodal_data": c.files}, "n_predict": 2}
		out := string(postJSONTo(t, st, "/completion", body, 400, nil))
		if !strings.Contains(out, c.want) || !strings.Contains(out, "multimodal_data") {
			t.Errorf("%s: %s, want a refusal naming multimodal_data saying %q", c.name, out, c.want)
		}
	}
	client := openaiClient(st)
	for _, c := range []struct {
		name string
		part openai.ChatCompletionContentPartInputAudioInputAudioParam
		want string
	}{
		{"not audio", openai.ChatCompletionContentPartInputAudioInputAudioParam{Data: pngOf(t, 8, 8, 1), Format: "wav"}, "not WAV, MP3 or FLAC"},
		{"format", openai.ChatCompletionContentPartInputAudioInputAudioParam{Data: b64(wav), Format: "ogg"}, "format"},
		{"hours long", openai.ChatCompletionContentPartInputAudioInputAudioParam{Data: b64(long), Format: "wav"}, "at most 30m0s"},
		{"empty", openai.ChatCompletionContentPartInputAudioInputAudioParam{Data: "", Format: "wav"}, "input_audio.data"},
	} {
		p := audioChatParams("")
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("hear"), openai.InputAudioContentPart(c.part), openai.TextContentPart("now")})}
		_, err := client.Chat.Completions.New(context.Background(), p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, c.want) || apiErr.Param != "messages" {
			t.Errorf("%s: %v, want a 400 on messages saying %q", c.name, err, c.want)
		}
	}
	// The APIs whose fields carry images only refuse audio in them.
	ollama := map[string]any{"model": "tiny", "stream": false, "messages": []map[string]any{{"role": "user", "content": "hear", "images": []string{b64(wav)}}}}
	if out := string(postJSONTo(t, st, "/api/chat", ollama, 400, nil)); !strings.Contains(out, "not an image") {
		t.Errorf("audio in Ollama's images: %s", out)
	}
	anthropicBody := map[string]any{"model": "tiny", "max_tokens": 4, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64(wav)}}, {"type": "text", "text": "hear"}}}}}
	if out := string(postJSONTo(t, st, "/v1/messages", anthropicBody, 400, nil)); !strings.Contains(out, "not an image") {
		t.Errorf("audio in an Anthropic image block: %s", out)
	}
	if got := imageCompletion(t, st, "a <__media__> b", b64(wav)); len(got.Tokens) == 0 {
		t.Error("no answer after the refusals")
	}
	seeing := startStack(t, app.Options{Lanes: 1, MMProj: mmprojFile(t)})
	body := map[string]any{"prompt": map[string]any{"prompt_string": "a <__media__> b", "multimodal_data": []string{b64(wav)}}, "n_predict": 2}
	if out := string(postJSONTo(t, seeing, "/completion", body, 400, nil)); !strings.Contains(out, "no audio encoder") {
		t.Errorf("a projector without an audio encoder: %s", out)
	}
}

// A conversation with audio of two windows is parked when the server
// stops and restores warm after a restart: both windows' keys come from the
// file's bytes (the second from its digest and number), nothing of the
// process.
func TestAudioParkRestoresAfterRestart(t *testing.T) {
	dir := t.TempDir()
	const text = "Listen to this <__media__> and tell me what it sounds like, how long it is and what made it."
	clip := sineB64(35, 250)
	st := startParkStack(t, app.Options{ParkDir: dir, MMProj: audioProjFile(t)})
	first := imageCompletion(t, st.Stack, text, clip)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if files := parkFiles(t, dir); len(files) == 0 {
		t.Fatal("nothing parked on stop")
	}
	again := startParkStack(t, app.Options{ParkDir: dir, MMProj: audioProjFile(t)})
	warm := imageCompletion(t, again.Stack, text, clip)
	t.Logf("after a restart: %d of %d prompt tokens cached", warm.TokensCached, warm.TokensEvaluated)
	if warm.TokensCached < 2*synth.MMProjAudioTokens {
		t.Errorf("after a restart %d tokens cached, want past both windows' %d rows", warm.TokensCached, 2*synth.MMProjAudioTokens)
	}
	if ok, why := sameOrNearTie(warm, first); !ok {
		t.Errorf("the restored answer differs: %s", why)
	}
}
