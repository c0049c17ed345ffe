package http

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/http/wire"
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

// llamaApplyTemplate serves POST /apply-template: the prompt a chat
// request would be rendered into, through the same code the generation
// endpoints use. Tools are accepted here, unlike there: rendering them
// asks nothing of the model.
func (s *Server) llamaApplyTemplate(ctx *fasthttp.RequestCtx, m *Model) error {
	var req applyTemplateRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	msgs, err := wire.ChatMessages(req.Messages)
	if err != nil {
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
	prompt, err := wire.Result(task.ChatPrompt(&m.Model, r))
	if err != nil {
		return err
	}
	return wire.WriteJSON(ctx, map[string]string{"prompt": prompt})
}
