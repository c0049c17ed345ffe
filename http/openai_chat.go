package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// chatMessages maps OpenAI messages onto the template's roles; content may
// be a string or an array of text parts. An assistant turn's tool calls
// reach the template with their arguments decoded to an object, as
// transformers passes them.
func chatMessages(in []oaiMessage) ([]chat.Message, error) {
	if len(in) == 0 {
		return nil, badParam("messages", "messages must not be empty")
	}
	out := make([]chat.Message, 0, len(in))
	for i, msg := range in {
		role := msg.Role
		switch role {
		case "developer":
			role = chat.RoleSystem
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, badParam("messages", "messages[%d]: unknown role %q", i, msg.Role)
		}
		text, err := contentText(msg.Content)
		if err != nil {
			return nil, badParam("messages", "messages[%d].content: %v", i, err)
		}
		if len(msg.ToolCalls) > 0 && role != chat.RoleAssistant {
			return nil, badParam("messages", "messages[%d].tool_calls: only assistant messages carry tool calls", i)
		}
		calls, err := oaiToolCalls(i, msg.ToolCalls)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Message{Role: role, Content: text, NoContent: isNull(msg.Content), ReasoningContent: msg.ReasoningContent,
			ToolCalls: calls, ToolCallID: msg.ToolCallID, Name: msg.Name})
	}
	return out, nil
}

// oaiToolCalls reads message i's tool calls. OpenAI sends arguments as a
// JSON string holding an object; an object itself is taken too (some
// clients send one). Anything else is refused naming the field, since a
// template would otherwise print garbage where the call's arguments go.
func oaiToolCalls(i int, in []oaiToolCall) ([]chat.ToolCall, error) {
	out := make([]chat.ToolCall, 0, len(in))
	for j, c := range in {
		field := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if c.Type != "" && c.Type != "function" {
			return nil, badParam("messages", "%s.type: %q is not a function call", field, c.Type)
		}
		if c.Function.Name == "" {
			return nil, badParam("messages", "%s.function.name: a tool call needs a name", field)
		}
		args, err := callArguments(c.Function.Arguments)
		if err != nil {
			return nil, badParam("messages", "%s.function.arguments: %v", field, err)
		}
		out = append(out, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out, nil
}

// callArguments returns a call's arguments as a JSON object: raw is a JSON
// string holding one, or the object itself.
func callArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("not a valid JSON string")
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			// Clients send "" for a call that takes no arguments.
			return json.RawMessage(`{}`), nil
		}
	}
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("must be a JSON object (or a string holding one)")
	}
	return raw, nil
}

// contentText reads message content: a string, null, or text parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []oaiContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("expected a string or an array of content parts")
	}
	text := ""
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content parts of type %q are not supported (text only)", p.Type)
		}
		text += p.Text
	}
	return text, nil
}

// logitBias reads OpenAI's {"token id": bias} map. A bias of -100 bans the
// token, as OpenAI documents it: it becomes -inf, so no temperature can
// bring the token back, and a map that bans every token is refused like
// the other APIs' (nothing could be generated).
func logitBias(m *Model, in map[string]float64) ([]engine.LogitBias, error) {
	if len(in) > maxBiasEntries {
		return nil, badParam("logit_bias", "logit_bias names %d tokens; at most %d", len(in), maxBiasEntries)
	}
	var out []engine.LogitBias
	for k, v := range in {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= m.Desc.Vocab {
			return nil, badParam("logit_bias", "logit_bias key %q is not a token id of this model", k)
		}
		if !(v >= -100 && v <= 100) {
			return nil, badParam("logit_bias", "logit_bias %v for token %d outside [-100, 100]", v, id)
		}
		bias := float32(v)
		if v == -100 {
			bias = float32(math.Inf(-1))
		}
		out = append(out, engine.LogitBias{Token: engine.Token(id), Bias: bias})
	}
	return out, checkBias(m, "logit_bias", out)
}

// choiceCount reads "n" (1–16).
func choiceCount(n *int) (int, error) {
	if n == nil {
		return 1, nil
	}
	if *n < 1 || *n > 16 {
		return 0, badParam("n", "n must be between 1 and 16")
	}
	return *n, nil
}

func (s *Server) chatSpec(ctx *fasthttp.RequestCtx, m *Model, req *oaiChatRequest) (*task.Request, error) {
	if err := req.oaiUnhonoured.check(); err != nil {
		return nil, err
	}
	shape, err := req.StructuredFields.Constraint(&m.Model)
	if err != nil {
		return nil, err
	}
	msgs, err := chatMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	tools, err := req.oaiTools.turnTools()
	if err != nil {
		return nil, err
	}
	turn := task.Chat{Messages: msgs, Tools: tools, Kwargs: req.ChatTemplateKwargs, Shape: shape}
	if e := req.ReasoningEffort; e != nil {
		if err := apiErr(turn.SetEffort("reasoning_effort", *e)); err != nil {
			return nil, err
		}
	}
	plan, err := apiResult(task.PlanChat(m.core(), &turn))
	if err != nil {
		return nil, err
	}
	limit := req.MaxCompletionTokens
	field := "max_completion_tokens"
	if limit == nil {
		limit, field = req.MaxTokens, "max_tokens"
	}
	maxTok, err := maxTokens(field, limit, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	n, err := choiceCount(req.N)
	if err != nil {
		return nil, err
	}
	smp, err := sampling(m, samplingFields{Temperature: req.Temperature, DefaultTemperature: 1, TopK: req.TopK, TopP: req.TopP, MinP: req.MinP,
		Seed: req.Seed, RepeatPenalty: req.RepeatPenalty, FrequencyPenalty: req.FrequencyPenalty, PresencePenalty: req.PresencePenalty})
	if err != nil {
		return nil, err
	}
	stops, err := wire.StopList(req.Stop, "stop")
	if err != nil {
		return nil, err
	}
	class, err := s.turnClass(ctx, &turn)
	if err != nil {
		return nil, err
	}
	g := &task.Request{Spec: task.Spec{Class: class, MaxTokens: maxTok, Sampling: smp, Stop: stops}}
	plan.Apply(&g.Spec)
	if req.Logprobs {
		top := 0
		if req.TopLogprobs != nil {
			top = *req.TopLogprobs
		}
		if top < 0 || top > engine.MaxLogprobs {
			return nil, badParam("top_logprobs", "top_logprobs must be between 0 and %d", engine.MaxLogprobs)
		}
		g.Logprobs = max(top, 1)
		g.TopLogprobs = top
	} else if req.TopLogprobs != nil && *req.TopLogprobs > 0 {
		return nil, badParam("top_logprobs", "top_logprobs needs logprobs: true")
	}
	if g.Bias, err = logitBias(m, req.LogitBias); err != nil {
		return nil, err
	}
	g.N = n
	return g, nil
}

func (s *Server) openaiChat(ctx *fasthttp.RequestCtx, m *Model) error {
	var req oaiChatRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	g, err := s.chatSpec(ctx, m, &req)
	if err != nil {
		return err
	}
	id := wire.NewID("chatcmpl-")
	created := time.Now().Unix()
	if req.Stream {
		return s.streamChat(ctx, m, g, id, created, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	}
	rctx, done := s.requestContext(ctx)
	defer done()
	g.Part = "choice"
	job, err := apiResult(task.Start(rctx, m.core(), g))
	if err != nil {
		return err
	}
	outs := chatChoices(g.Choices)
	turns, err := runJob(rctx, job, task.SinkFuncs{OnDelta: func(i int, _ []reply.Event, d *delta) error {
		if c := outs[i]; d != nil && c.spec.Logprobs > 0 {
			c.addLogprobs(m, d)
		}
		return nil
	}})
	if err != nil {
		return err
	}
	for i, t := range turns {
		outs[i].turnOut = turnOutOf(t)
	}
	resp := oaiChatResponse{ID: id, Object: "chat.completion", Created: created, Model: m.Name, SystemFingerprint: fingerprint(m)}
	for i, o := range outs {
		resp.Choices = append(resp.Choices, oaiChatChoice{
			Index: i, Message: o.message(), Logprobs: o.logprobs, FinishReason: o.finishReason(),
		})
	}
	resp.Usage = usageOf(g, outs)
	return writeJSON(ctx, resp)
}

// chatChoices are the rendering state of a request's choices (task.Plan
// gave each its own seed, so that n > 1 gives different answers).
func chatChoices(specs []*task.Spec) []*choiceOut {
	choices := make([]*choiceOut, len(specs))
	for i, spec := range specs {
		choices[i] = &choiceOut{spec: spec}
	}
	return choices
}

// choiceOut is one of n choices being generated.
type choiceOut struct {
	turnOut
	spec     *task.Spec
	logprobs *oaiLogprobs
}

// message is the choice's reply as OpenAI returns it.
func (c *choiceOut) message() oaiChatMessage {
	msg := oaiChatMessage{Role: "assistant", ReasoningContent: c.Reasoning}
	if c.Content != "" || len(c.Calls) == 0 {
		text := c.Content
		msg.Content = &text
	}
	if len(c.Calls) > 0 {
		msg.ToolCalls = oaiReplyCalls(c.Calls)
	}
	return msg
}

func (c *choiceOut) addLogprobs(m *Model, d *delta) {
	if c.logprobs == nil {
		c.logprobs = &oaiLogprobs{Content: []oaiTokenLogprob{}}
	}
	for i := range d.Tokens {
		c.logprobs.Content = append(c.logprobs.Content, oaiTokenEntry(m, c.spec, &d.Tokens[i]))
	}
}

// oaiTokenEntry is one token's logprob entry: its text, its bytes (a token
// may be part of a character), and the top alternatives asked for.
func oaiTokenEntry(m *Model, g *task.Spec, t *tokenOut) oaiTokenLogprob {
	e := oaiTokenLogprob{Token: string(t.Piece), Logprob: float64(t.Logprob), Bytes: byteList(t.Piece), TopLogprobs: []oaiTopLogprob{}}
	task.EachTop(m.core(), t, g.TopLogprobs, func(_ engine.Token, piece []byte, logprob float32) {
		e.TopLogprobs = append(e.TopLogprobs, oaiTopLogprob{Token: string(piece), Logprob: float64(logprob), Bytes: byteList(piece)})
	})
	return e
}

func usageOf(g *task.Request, outs []*choiceOut) oaiUsage {
	u := oaiUsage{PromptTokens: len(g.Prompt)}
	for _, o := range outs {
		u.CompletionTokens += o.Completed
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if len(outs) > 0 {
		u.PromptTokensDetails = &oaiPromptDetails{CachedTokens: outs[0].Result.CachedTokens}
	}
	return u
}
