package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"superfluid/app"
	sfhttp "superfluid/http"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/synth"
)

// Remote images (serve --allow-remote-media) end to end: a local page
// server answers each way a remote image can go wrong.

// remoteImageServer serves png at /cat.png and the failure cases beside it.
func remoteImageServer(t *testing.T, png []byte) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/cat.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(png)
	})
	mux.HandleFunc("/missing.png", http.NotFound)
	mux.HandleFunc("/slow.png", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/huge.png", func(w http.ResponseWriter, r *http.Request) {
		w.Write(png)
		chunk := make([]byte, 1<<20)
		for range 1 << 14 { // 16 GiB, unless the reader stops at the limit
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		fmt.Fprint(w, "<!doctype html><title>not an image</title>")
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/cat.png", http.StatusFound) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// An image_url naming an http URL is fetched and answered as the same
// image sent inline would be — warm by its digest either way round — and
// each failing fetch is a 400 naming messages with its reason; an
// Anthropic url source is fetched the same way.
func TestImageRemoteURL(t *testing.T) {
	b64 := pngOf(t, 48, 64, 31)
	png, _ := base64.StdEncoding.DecodeString(b64)
	pages := remoteImageServer(t, png)
	fetcher := media.NewFetcher(media.FetcherOptions{MaxBytes: wire.MaxMediaBytes, Timeout: 2 * time.Second})
	st := startStack(t, app.Options{Lanes: 2, MMProj: mmprojFile(t), HTTP: sfhttp.Config{RemoteMedia: fetcher}})
	client := openaiClient(st)
	ask := func(url string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("Describe it."),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}),
			})},
			MaxCompletionTokens: openai.Int(10),
			Temperature:         openai.Float(0),
		}
	}
	remote, err := client.Chat.Completions.New(context.Background(), ask(pages.URL+"/cat.png"))
	if err != nil {
		t.Fatal(err)
	}
	if remote.Usage.PromptTokens < synth.MMProjImageTokens+3 || remote.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v: the fetched image's %d rows are not counted", remote.Usage, synth.MMProjImageTokens)
	}
	inline, err := client.Chat.Completions.New(context.Background(), ask("data:image/png;base64,"+b64))
	if err != nil {
		t.Fatal(err)
	}
	if inline.Choices[0].Message.Content != remote.Choices[0].Message.Content {
		t.Errorf("inline %q, fetched %q: not the same image", inline.Choices[0].Message.Content, remote.Choices[0].Message.Content)
	}
	if inline.Usage.PromptTokensDetails.CachedTokens < synth.MMProjImageTokens {
		t.Errorf("the fetched image sent inline: %d cached tokens, want past its %d rows (one digest)", inline.Usage.PromptTokensDetails.CachedTokens, synth.MMProjImageTokens)
	}
	if moved, err := client.Chat.Completions.New(context.Background(), ask(pages.URL+"/moved")); err != nil || moved.Choices[0].Message.Content != remote.Choices[0].Message.Content {
		t.Errorf("a redirect to the image: %v", err)
	}

	for _, tc := range []struct{ url, want string }{
		{pages.URL + "/missing.png", "404 Not Found"},
		{pages.URL + "/slow.png", "no answer within 2s"},
		{pages.URL + "/huge.png", fmt.Sprintf("more than %d bytes", wire.MaxMediaBytes)},
		{pages.URL + "/page.html", "not a PNG, JPEG, GIF or BMP image"},
		{pages.URL + "/loop", "more than 3 redirects"},
		{"ftp://" + strings.TrimPrefix(pages.URL, "http://") + "/cat.png", "a ftp: URL is not fetched (http and https only)"},
		{"http://127.0.0.1:1/closed.png", "connection refused"},
	} {
		_, err := client.Chat.Completions.New(context.Background(), ask(tc.url))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "messages" || !strings.Contains(apiErr.Message, tc.want) {
			t.Errorf("%s: %v, want a 400 naming messages saying %q", tc.url, err, tc.want)
		}
	}
	if _, err := client.Chat.Completions.New(context.Background(), ask(pages.URL+"/cat.png")); err != nil {
		t.Errorf("the server after the failures: %v", err)
	}

	c := anthropicClient(st)
	url := anthropic.NewUserMessage(anthropic.NewTextBlock("Describe it."), anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: pages.URL + "/cat.png"}))
	b64msg := anthropic.NewUserMessage(anthropic.NewTextBlock("Describe it."), anthropic.NewImageBlockBase64("image/png", b64))
	byURL, err := c.Messages.New(context.Background(), anthropicGreedy(8, url))
	if err != nil {
		t.Fatal(err)
	}
	byData, err := c.Messages.New(context.Background(), anthropicGreedy(8, b64msg))
	if err != nil {
		t.Fatal(err)
	}
	if byURL.Usage.InputTokens < synth.MMProjImageTokens || len(byURL.Content) == 0 || len(byData.Content) == 0 || byURL.Content[0].Text != byData.Content[0].Text {
		t.Errorf("url source %+v, base64 %+v: not the same image", byURL, byData)
	}
	missing := anthropic.NewUserMessage(anthropic.NewTextBlock("and?"), anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: pages.URL + "/missing.png"}))
	_, err = c.Messages.New(context.Background(), anthropicGreedy(4, missing))
	var aErr *anthropic.Error
	if !errors.As(err, &aErr) || aErr.StatusCode != 400 || !bytes.Contains([]byte(aErr.RawJSON()), []byte("404 Not Found")) {
		t.Errorf("a url source answering 404: %v", err)
	}
}

// A client that hangs up while its image is fetched ends the fetch: the
// page sees its request cancelled although the fetch timeout is an hour.
func TestImageRemoteFetchEndsWithClient(t *testing.T) {
	reached, cancelled := make(chan struct{}), make(chan struct{})
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(reached)
		<-r.Context().Done()
		close(cancelled)
	}))
	defer page.Close()
	fetcher := media.NewFetcher(media.FetcherOptions{MaxBytes: wire.MaxMediaBytes, Timeout: time.Hour})
	st := startStack(t, app.Options{MMProj: mmprojFile(t), HTTP: sfhttp.Config{RemoteMedia: fetcher}})
	ctx, hangUp := context.WithCancel(context.Background())
	done := make(chan error, 1)
	client := openaiClient(st)
	go func() {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: page.URL + "/never.png"}),
				openai.TextContentPart("Describe it."),
			})},
			MaxCompletionTokens: openai.Int(4),
		})
		done <- err
	}()
	<-reached
	hangUp()
	if err := <-done; err == nil {
		t.Fatal("the request was answered")
	}
	select {
	case <-cancelled:
	case <-time.After(time.Minute): // a bound on the test, not a measure
		t.Fatal("the fetch outlived its client")
	}
}
