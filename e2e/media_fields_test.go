package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"superfluid/app"
	"superfluid/synth"
)

// The image fields beyond a generation's prompt: /apply-template's image
// parts, llama-server's top-level image fields, Anthropic's cache pins
// over a prompt with an image.

// /apply-template renders an image_url part as the media marker, as
// llama-server does, on a model with a projector; without one it is a 400
// naming messages; a bad inline image or a remote one without the flag
// is refused as on a chat.
func TestImageApplyTemplate(t *testing.T) {
	st := startStack(t, app.Options{MMProj: mmprojFile(t)})
	img := "data:image/png;base64," + pngOf(t, 20, 20, 3)
	msgs := []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "text", "text": "first"}, {"type": "image_url", "image_url": map[string]string{"url": img}},
		{"type": "text", "text": "then"}, {"type": "image_url", "image_url": map[string]string{"url": img}},
	}}}
	var out struct{ Prompt string }
	postJSONTo(t, st, "/apply-template", map[string]any{"messages": msgs}, 200, &out)
	if strings.Count(out.Prompt, "<__media__>") != 2 || !strings.Contains(out.Prompt, "first<__media__>then<__media__>") {
		t.Errorf("rendered %q, want two markers in the user turn", out.Prompt)
	}
	for _, c := range []struct{ url, want string }{
		{"data:image/png;base64,aGVsbG8=", "not a PNG"},
		{"https://example.com/x.png", "--allow-remote-media"},
		{"gopher://example.com/x.png", "gopher: URL is not fetched"},
	} {
		bad := []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image_url", "image_url": map[string]string{"url": c.url}}}}}
		raw := postJSONTo(t, st, "/apply-template", map[string]any{"messages": bad}, 400, nil)
		if !strings.Contains(string(raw), c.want) || !strings.Contains(string(raw), "messages") {
			t.Errorf("%s: %s, want a 400 naming messages saying %q", c.url, raw, c.want)
		}
	}
	plain := startStack(t, app.Options{})
	raw := postJSONTo(t, plain, "/apply-template", map[string]any{"messages": msgs}, 400, nil)
	if !strings.Contains(string(raw), "image input is not supported") {
		t.Errorf("no projector: %s", raw)
	}
}

// llama-server takes images on /completion only inside the prompt object:
// a top-level multimodal_data, or the former image_data, is a 400 naming
// it and saying where images go.
func TestImageTopLevelFieldsRefused(t *testing.T) {
	st := startStack(t, app.Options{MMProj: mmprojFile(t)})
	img := pngOf(t, 20, 20, 4)
	for field, body := range map[string]map[string]any{
		"multimodal_data": {"prompt": "x <__media__> y", "multimodal_data": []string{img}, "n_predict": 1},
		"image_data":      {"prompt": "x [img-1] y", "image_data": []map[string]any{{"data": img, "id": 1}}, "n_predict": 1},
	} {
		raw := string(postJSONTo(t, st, "/completion", body, 400, nil))
		if !strings.Contains(raw, field) || !strings.Contains(raw, "prompt_string") {
			t.Errorf("%s: %s, want a 400 naming it and the prompt object", field, raw)
		}
	}
	// The empty forms clients send by habit ask for nothing.
	postJSONTo(t, st, "/completion", map[string]any{"prompt": "x", "image_data": []any{}, "multimodal_data": []any{}, "n_predict": 1}, 200, nil)
}

// A cache_control breakpoint after an image marks the prompt through the
// image as the cache keys it (its digest's tokens): the cold request
// reports the image's rows as cache creation and pins the prefix, the
// warm one reads them from the cache.
func TestImageAnthropicCachePin(t *testing.T) {
	st := startStack(t, app.Options{MMProj: mmprojFile(t)})
	c := anthropicClient(st)
	text := anthropic.NewTextBlock("Describe the picture above in a few words.")
	text.OfText.CacheControl = anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}
	msg := anthropic.NewUserMessage(anthropic.NewImageBlockBase64("image/png", pngOf(t, 36, 28, 51)), text)
	cold, err := c.Messages.New(context.Background(), anthropicGreedy(4, msg))
	if err != nil {
		t.Fatal(err)
	}
	if cold.Usage.CacheCreationInputTokens < synth.MMProjImageTokens+5 {
		t.Errorf("cold: usage %s, want the marked prefix through the image's %d rows created", cold.Usage.RawJSON(), synth.MMProjImageTokens)
	}
	if n := st.Cache.Pins(); n != 1 {
		t.Errorf("%d pins, want the marked prefix's", n)
	}
	warm, err := c.Messages.New(context.Background(), anthropicGreedy(4, msg))
	if err != nil {
		t.Fatal(err)
	}
	if warm.Usage.CacheReadInputTokens < cold.Usage.CacheCreationInputTokens || warm.Usage.CacheCreationInputTokens != 0 {
		t.Errorf("warm: usage %s, want the marked prefix read from the cache", warm.Usage.RawJSON())
	}
}
