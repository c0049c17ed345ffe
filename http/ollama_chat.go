package http

import (
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
)

// ollamaChat serves POST /api/chat.
func (s *Server) ollamaChat(ctx *fasthttp.RequestCtx, m *Model) error {
	start := time.Now()
	var req ollamaChatRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	job, err := s.ollamaChatJob(ctx, m, &req)
	if err != nil {
		return err
	}
	job.start = start
	return s.runOllama(ctx, job)
}

// ollamaChatJob validates a chat request and renders the conversation with
// the model's chat template. Tools are refused rather than ignored: a
// client that offers tools expects tool calls back, and this server does
// not parse them out of the model's text — Ollama answers the same 400 for
// a model without the tools capability.
func (s *Server) ollamaChatJob(ctx *fasthttp.RequestCtx, m *Model, req *ollamaChatRequest) (*ollamaJob, error) {
	if err := ollamaCheckModel(m, req.Model); err != nil {
		return nil, err
	}
	if err := ollamaCheckCommon(req.Model, req.KeepAlive, req.Think, req.TopLogs); err != nil {
		return nil, err
	}
	shape, err := ollamaFormat(req.Format)
	if err != nil {
		return nil, err
	}
	if hasItems(req.Tools) {
		return nil, badParam("tools", "%q does not support tools", req.Model)
	}
	opts, err := parseOllamaOptions(req.Options)
	if err != nil {
		return nil, err
	}
	job := &ollamaJob{name: req.Model, stream: req.Stream == nil || *req.Stream, chat: true}
	if len(req.Messages) == 0 {
		job.loadReason = loadReason(req.KeepAlive)
		return job, nil
	}
	msgs, err := ollamaMessages(req.Model, req.Messages)
	if err != nil {
		return nil, err
	}
	job.model = opts.window(m)
	prompt, err := renderContinuation(job.model, msgs)
	if err != nil {
		return nil, err
	}
	class, err := s.requestClass(ctx, "")
	if err != nil {
		return nil, err
	}
	job.g, err = ollamaSpec(m, job.model, &opts, prompt, class, req.Logprobs, req.TopLogs)
	if err != nil {
		return nil, err
	}
	job.g.Grammar, err = grammarFor(m, shape, prompt, true)
	job.g.grammarField = shape.field
	return job, err
}

// ollamaMessages maps Ollama's messages onto the template's roles (Ollama
// lowercases roles; so does this). Images and tool calls are refused: the
// server runs text models and does not call tools.
func ollamaMessages(model string, in []ollamaMessage) ([]chat.Message, error) {
	out := make([]chat.Message, 0, len(in))
	for i, msg := range in {
		role := strings.ToLower(msg.Role)
		switch role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, badParam("messages", "messages[%d]: unknown role %q (expected system, user, assistant or tool)", i, msg.Role)
		}
		if hasItems(msg.Images) {
			return nil, badParam("messages", "%q does not support images: this server runs text models only", model)
		}
		if hasItems(msg.ToolCalls) {
			return nil, badParam("messages", "%q does not support tools", model)
		}
		out = append(out, chat.Message{Role: role, Content: msg.Content})
	}
	return out, nil
}

// renderContinuation renders a conversation for the assistant's next turn.
// When the conversation ends with an assistant message, that message is
// the start of the reply (Ollama's and Anthropic's "prefill"): the rest is
// rendered with the generation prompt and the partial reply appended, so
// the model continues it instead of starting a new turn.
func renderContinuation(m *Model, msgs []chat.Message) ([]engine.Token, error) {
	last := len(msgs) - 1
	if last < 1 || msgs[last].Role != chat.RoleAssistant {
		return renderChat(m, msgs)
	}
	if m.Chat == nil {
		return nil, badRequest("the model has no chat template; use the completion endpoints")
	}
	if err := checkMessageBytes(m, msgs); err != nil {
		return nil, err
	}
	text, err := m.Chat.Render(msgs[:last], true)
	if err != nil {
		return nil, badRequest("the model's chat template cannot render this conversation: %v", err)
	}
	prompt, err := tokenize(m, text+msgs[last].Content, true)
	if err != nil {
		return nil, err
	}
	return prompt, checkPrompt(m, prompt)
}
