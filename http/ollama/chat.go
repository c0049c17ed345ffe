package ollama

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/reply"
	"superfluid/task"
)

// chat serves POST /api/chat.
func (a *api) chat(ctx *fasthttp.RequestCtx, m *task.Model) error {
	start := time.Now()
	var req chatRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	j, err := a.chatJob(ctx, m, &req)
	if err != nil {
		return err
	}
	j.start = start
	return a.answer(ctx, j)
}

// chatJob validates a chat request and plans its turn: the conversation
// and tools rendered with the model's chat template, thinking as think
// asks, the reply parsed into content, thinking and tool calls.
// A job with images holds a reference to them (j.req.Media) that answer
// drops once it has submitted the job.
func (a *api) chatJob(ctx *fasthttp.RequestCtx, m *task.Model, req *chatRequest) (_ *job, err error) {
	if err := checkModel(req.Model); err != nil {
		return nil, err
	}
	if err := checkCommon(req.KeepAlive, req.TopLogs); err != nil {
		return nil, err
	}
	think, effort, err := readThink(req.Think)
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
	opts, err := parseOptions(req.Options)
	if err != nil {
		return nil, err
	}
	j := &job{name: req.Model, stream: req.Stream == nil || *req.Stream, chat: true}
	if len(req.Messages) == 0 {
		j.loadReason = loadReason(req.KeepAlive)
		return j, nil
	}
	msgs, images, err := messages(req.Messages)
	if err != nil {
		return nil, err
	}
	j.model = opts.window(m)
	turn := task.Chat{Messages: msgs, Tools: tools, Think: think, Effort: effort, Continues: true, Shape: shape, Images: images, ImageField: "messages"}
	plan, err := task.PlanChat(j.model, &turn)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			plan.Close()
		}
	}()
	class, err := wire.TurnClass(ctx, a.host, &turn)
	if err != nil {
		return nil, err
	}
	j.req, err = newRequest(m, j.model, &opts, plan.Prompt, class, req.Logprobs, req.TopLogs)
	if err != nil {
		return nil, err
	}
	plan.Apply(&j.req.Spec)
	return j, nil
}

// replyCalls are a turn's calls as Ollama returns them, numbered from
// first.
func replyCalls(calls []reply.ToolCall, first int) []toolCall {
	out := make([]toolCall, len(calls))
	for i, c := range calls {
		out[i] = toolCall{ID: wire.CallID(c), Function: toolFunction{Index: first + i, Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// messages maps Ollama's messages onto the template's roles (Ollama
// lowercases roles; so does this). An assistant turn's tool calls, whose
// arguments Ollama sends as an object, and a tool turn's tool_name reach
// the template; a user message's images (base64) go before its text, a
// media marker each, as Ollama places them.
func messages(in []message) ([]chat.Message, [][]byte, error) {
	out := make([]chat.Message, 0, len(in))
	var images [][]byte
	for i, msg := range in {
		role := strings.ToLower(msg.Role)
		switch role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, nil, wire.BadParam("messages", "messages[%d]: unknown role %q (expected system, user, assistant or tool)", i, msg.Role)
		}
		content := msg.Content
		if hasItems(msg.Images) {
			if role != chat.RoleUser {
				return nil, nil, wire.BadParam("messages", "messages[%d].images: images are taken in user messages only", i)
			}
			imgs, err := readImages(fmt.Sprintf("messages[%d].images", i), msg.Images, len(images))
			if err != nil {
				return nil, nil, err
			}
			images = append(images, imgs...)
			content = strings.Repeat(task.MediaMarker+"\n", len(imgs)) + content
		}
		calls, err := messageCalls(i, role, msg.ToolCalls)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, chat.Message{Role: role, Content: content, ReasoningContent: msg.Thinking, ToolCalls: calls, Name: msg.ToolName})
	}
	return task.CallOnlyTurns(out), images, nil
}

// readImages decodes a list of base64 images; have is how many the
// request carries before them.
func readImages(field string, raw json.RawMessage, have int) ([][]byte, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, wire.BadParam("messages", "%s: expected a list of base64 strings", field)
	}
	if have+len(list) > media.MaxImages {
		return nil, wire.BadParam("messages", "%s: a request carries at most %d images", field, media.MaxImages)
	}
	out := make([][]byte, 0, len(list))
	for k, s := range list {
		b, err := media.DecodeBase64(s, wire.MaxMediaBytes)
		if err != nil {
			return nil, wire.BadParam("messages", "%s[%d]: %v", field, k, err)
		}
		if media.IsAudio(b) {
			// The core takes audio where its bytes say so; Ollama's
			// images field carries images only.
			return nil, wire.BadParam("messages", "%s[%d]: audio, not an image (images carries images only)", field, k)
		}
		out = append(out, b)
	}
	return out, nil
}

// messageCalls reads message i's tool_calls: [{function: {name,
// arguments}}], arguments an object (a string holding one is taken too).
func messageCalls(i int, role string, raw json.RawMessage) ([]chat.ToolCall, error) {
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
