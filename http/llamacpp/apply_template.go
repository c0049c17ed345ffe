package llamacpp

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/task"
)

// applyTemplateRequest is llama-server's POST /apply-template body: an
// OpenAI chat request of which only what the template sees is read.
type applyTemplateRequest struct {
	Model               string                     `json:"model"`
	Messages            []wire.Message             `json:"messages"`
	Tools               []json.RawMessage          `json:"tools"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
}

// applyTemplate serves POST /apply-template: the prompt a chat
// request would be rendered into, through the same code the generation
// endpoints use. Tools are accepted here, unlike there: rendering them
// asks nothing of the model. An image_url part renders as the media
// marker, as llama-server renders it, on a model with a projector
// (templateImages).
func (a *api) applyTemplate(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req applyTemplateRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	marker := task.MediaMarker
	if m.Media != nil {
		marker = m.Media.Marker()
	}
	msgs, images, remote, err := wire.ChatMessagesMedia(req.Messages, marker)
	if err != nil {
		return err
	}
	if err := a.templateImages(m, images, remote); err != nil {
		return err
	}
	for i, t := range req.Tools {
		if t = bytes.TrimSpace(t); len(t) == 0 || t[0] != '{' {
			return wire.BadParam("tools", "tools[%d]: a tool definition is a JSON object", i)
		}
	}
	r := chat.Request{Messages: msgs, Tools: req.Tools, Kwargs: req.ChatTemplateKwargs, AddGenerationPrompt: true}
	if req.AddGenerationPrompt != nil {
		r.AddGenerationPrompt = *req.AddGenerationPrompt
	}
	prompt, err := task.ChatPrompt(m, r)
	if err != nil {
		return err
	}
	return wire.WriteJSON(ctx, map[string]string{"prompt": prompt})
}

// templateImages checks a rendering's images as a chat request's would be
// checked, short of what only generating needs: a model without a
// projector refuses them (llama-server: "image input is not supported"),
// an inline image's header must pass media.Check, and a remote URL needs
// --allow-remote-media — but is not fetched, since the rendering holds
// only its marker.
func (a *api) templateImages(m *task.Model, images [][]byte, remote []media.Remote) error {
	if len(images) == 0 {
		return nil
	}
	if m.Media == nil {
		return wire.BadParam("messages", "messages: image input is not supported: model %s has no vision projector (serve --mmproj)", m.Name)
	}
	if a.host.Settings().RemoteMedia == nil {
		if err := wire.FetchMediaWith(context.Background(), nil, m, images, remote); err != nil {
			return err
		}
	}
	for i, b := range images {
		if b == nil {
			continue // a remote image's slot
		}
		if _, err := media.Check(b); err != nil {
			return wire.BadParam("messages", "messages: image %d: %v", i, err)
		}
	}
	return nil
}
