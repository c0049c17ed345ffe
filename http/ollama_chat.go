package http

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// ollamaChat serves POST /api/chat.
func (s *Server) ollamaChat(ctx *fasthttp.RequestCtx, m *Model) error {
	start := time.Now()
	var req ollamaChatRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	job, err := s.ollamaChatJob(ctx, m, &req)
	if err != nil {
		return err
	}
	job.start = start
	return s.runOllama(ctx, job)
}

// ollamaChatJob validates a chat request and plans its turn: the
// conversation and tools rendered with the model's chat template, thinking
// as think asks, the reply parsed into content, thinking and tool calls.
func (s *Server) ollamaChatJob(ctx *fasthttp.RequestCtx, m *Model, req *ollamaChatRequest) (*ollamaJob, error) {
	if err := ollamaCheckModel(req.Model); err != nil {
		return nil, err
	}
	if err := ollamaCheckCommon(req.KeepAlive, req.TopLogs); err != nil {
		return nil, err
	}
	think, effort, err := ollamaThink(req.Think)
	if err != nil {
		return nil, err
	}
	shape, err := wire.OllamaFormat(req.Format)
	if err != nil {
		return nil, err
	}
	tools, err := (&wire.ToolFields{Tools: req.Tools}).ReadTools()
	if err != nil {
		return nil, err
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
	turn := task.Chat{Messages: msgs, Tools: tools, Think: think, Effort: effort, Continues: true, Shape: shape}
	plan, err := wire.Result(task.PlanChat(&job.model.Model, &turn))
	if err != nil {
		return nil, err
	}
	class, err := wire.TurnClass(ctx, s.host(), &turn)
	if err != nil {
		return nil, err
	}
	job.g, err = ollamaSpec(m, job.model, &opts, plan.Prompt, class, req.Logprobs, req.TopLogs)
	if err != nil {
		return nil, err
	}
	plan.Apply(&job.g.Spec)
	return job, nil
}

// ollamaCalls are a turn's calls as Ollama returns them.
func ollamaCalls(calls []reply.ToolCall, first int) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		out[i] = ollamaToolCall{ID: wire.CallID(c), Function: ollamaToolFunction{Index: first + i, Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// ollamaMessages maps Ollama's messages onto the template's roles (Ollama
// lowercases roles; so does this). An assistant turn's tool calls, whose
// arguments Ollama sends as an object, and a tool turn's tool_name reach
// the template; images are refused: the server runs text models.
func ollamaMessages(model string, in []ollamaMessage) ([]chat.Message, error) {
	out := make([]chat.Message, 0, len(in))
	for i, msg := range in {
		role := strings.ToLower(msg.Role)
		switch role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, wire.BadParam("messages", "messages[%d]: unknown role %q (expected system, user, assistant or tool)", i, msg.Role)
		}
		if hasItems(msg.Images) {
			return nil, wire.BadParam("messages", "%q does not support images: this server runs text models only", model)
		}
		calls, err := ollamaToolCalls(i, role, msg.ToolCalls)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Message{Role: role, Content: msg.Content, ReasoningContent: msg.Thinking, ToolCalls: calls, Name: msg.ToolName})
	}
	return task.CallOnlyTurns(out), nil
}

// ollamaToolCalls reads message i's tool_calls: [{function: {name,
// arguments}}], arguments an object (a string holding one is taken too).
func ollamaToolCalls(i int, role string, raw json.RawMessage) ([]chat.ToolCall, error) {
	if !hasItems(raw) {
		return nil, nil
	}
	field := fmt.Sprintf("messages[%d].tool_calls", i)
	if role != chat.RoleAssistant {
		return nil, wire.BadParam("messages", "%s: only assistant messages carry tool calls", field)
	}
	var in []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, wire.BadParam("messages", "%s: expected a list of {function: {name, arguments}}", field)
	}
	out := make([]chat.ToolCall, 0, len(in))
	for j, c := range in {
		if c.Function.Name == "" {
			return nil, wire.BadParam("messages", "%s[%d].function.name: a tool call needs a name", field, j)
		}
		args, err := wire.CallArguments(c.Function.Arguments)
		if err != nil {
			return nil, wire.BadParam("messages", "%s[%d].function.arguments: %v", field, j, err)
		}
		out = append(out, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out, nil
}
