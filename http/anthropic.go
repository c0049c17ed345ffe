package http

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
)

// anthropicRoutes serve Anthropic's Messages API, so that the Anthropic
// SDKs and the agents built on them can run against a local model. The
// anthropic-version and anthropic-beta headers are accepted and not
// checked: there is one behaviour, the one described here.
func anthropicRoutes() map[string]route {
	return map[string]route{
		"/v1/messages":              {method: "POST", kind: apiAnthropic, handler: (*Server).anthropicMessages},
		"/v1/messages/count_tokens": {method: "POST", kind: apiAnthropic, handler: (*Server).anthropicCountTokens},
	}
}

// anthropicMaxStops bounds stop_sequences: each one is matched against the
// tail of the text after every token.
const anthropicMaxStops = 64

// anthropicMessages serves POST /v1/messages: the reply as one message, or
// streamed as server-sent events when "stream" is true.
func (s *Server) anthropicMessages(ctx *fasthttp.RequestCtx, m *Model) error {
	var req anthropicRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	g, err := s.anthropicSpec(ctx, m, &req)
	if err != nil {
		return err
	}
	id := newID("msg_")
	if req.Stream {
		return s.streamAnthropic(ctx, m, g, id, req.Model)
	}
	rctx, done := s.requestContext(ctx)
	defer done()
	out, err := generate(rctx, m, g, true, nil)
	if err != nil {
		return err
	}
	reason, seq := anthropicStopReason(out)
	return writeJSON(ctx, anthropicResponse{
		ID: id, Type: "message", Role: "assistant", Model: req.Model,
		Content:    []anthropicText{{Type: "text", Text: string(out.Text)}},
		StopReason: &reason, StopSequence: seq, Usage: anthropicUsageOf(g, out),
	})
}

// anthropicCountTokens answers /v1/messages/count_tokens with the prompt's
// length in this model's tokens, rendered exactly as /v1/messages would.
func (s *Server) anthropicCountTokens(ctx *fasthttp.RequestCtx, m *Model) error {
	var req anthropicRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	if err := anthropicCheckModel(m, req.Model); err != nil {
		return err
	}
	prompt, err := anthropicPrompt(m, &req)
	if err != nil {
		return err
	}
	if _, _, err := anthropicGrammar(m, &req, prompt); err != nil {
		return err
	}
	return writeJSON(ctx, map[string]int{"input_tokens": len(prompt)})
}

// anthropicSpec validates a Messages request and renders its prompt.
func (s *Server) anthropicSpec(ctx *fasthttp.RequestCtx, m *Model, req *anthropicRequest) (*genSpec, error) {
	if err := anthropicCheckModel(m, req.Model); err != nil {
		return nil, err
	}
	if req.MaxTokens == nil {
		return nil, badParam("max_tokens", "max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return nil, badParam("max_tokens", "max_tokens: must be at least 1")
	}
	maxTok, err := maxTokens("max_tokens", req.MaxTokens, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	if req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 1) {
		return nil, badParam("temperature", "temperature: must be between 0 and 1")
	}
	smp, err := sampling(m, samplingFields{Temperature: req.Temperature, DefaultTemperature: 1, TopK: req.TopK, TopP: req.TopP})
	if err != nil {
		return nil, err
	}
	if len(req.StopSequences) > anthropicMaxStops {
		return nil, badParam("stop_sequences", "stop_sequences: at most %d", anthropicMaxStops)
	}
	prompt, err := anthropicPrompt(m, req)
	if err != nil {
		return nil, err
	}
	class, err := s.requestClass(ctx, "")
	if err != nil {
		return nil, err
	}
	g := &genSpec{Prompt: prompt, Class: class, MaxTokens: maxTok, Sampling: smp, Stop: req.StopSequences}
	if g.Grammar, g.grammarField, err = anthropicGrammar(m, req, prompt); err != nil {
		return nil, err
	}
	return g, nil
}

// anthropicGrammar is the grammar of the request's structured output, nil
// when it asks for none, and the field it came from.
func anthropicGrammar(m *Model, req *anthropicRequest, prompt []engine.Token) (*engine.GrammarSpec, string, error) {
	shape, err := anthropicFormat(outputConfigFormat(req), req.OutputFormat)
	if err != nil {
		return nil, "", err
	}
	spec, err := grammarFor(m, shape, prompt, true)
	return spec, shape.field, err
}

func outputConfigFormat(req *anthropicRequest) json.RawMessage {
	if req.OutputConfig == nil {
		return nil
	}
	return req.OutputConfig.Format
}

func anthropicCheckModel(m *Model, name string) error {
	if name == "" {
		return badParam("model", "model: Field required")
	}
	if checkModelName(m, name) != nil {
		return notFound("model: %s", name)
	}
	return nil
}

// anthropicPrompt renders system and messages with the model's chat
// template, after refusing what the server does not honour: tools (a
// client that offers them expects tool_use blocks back) and thinking (no
// thinking blocks come back). count_tokens refuses them too, so that a
// count is never of a request /v1/messages would not serve.
func anthropicPrompt(m *Model, req *anthropicRequest) ([]engine.Token, error) {
	if err := refuseUnhonoured(
		unhonoured{"tools", req.Tools, emptyValue, whyTools},
		// Without tools "auto" and "none" both mean: answer in text.
		unhonoured{"tool_choice", req.ToolChoice, typeIn("auto", "none"), whyTools},
		unhonoured{"mcp_servers", req.MCPServers, emptyValue, whyTools},
		unhonoured{"thinking", req.Thinking, typeIn("disabled"), "this server does not produce thinking blocks"},
	); err != nil {
		return nil, err
	}
	msgs, err := anthropicMessages(req)
	if err != nil {
		return nil, err
	}
	return renderContinuation(m, msgs)
}

// anthropicMessages maps the request onto chat messages: the system
// prompt first, then the turns (the current API also allows system turns
// among them). As in Anthropic's API, consecutive turns of the same role are combined into one, every
// message but a final assistant one needs content, and a final assistant
// message is the start of the reply (prefill), which must not end in
// whitespace. Text blocks of one message are joined by a blank line.
func anthropicMessages(req *anthropicRequest) ([]chat.Message, error) {
	if len(req.Messages) == 0 {
		return nil, badParam("messages", "messages: at least one message is required")
	}
	system, err := anthropicContent("system", req.System)
	if err != nil {
		return nil, err
	}
	var out []chat.Message
	if system != "" {
		out = append(out, chat.Message{Role: chat.RoleSystem, Content: system})
	}
	for i, msg := range req.Messages {
		if msg.Role != chat.RoleUser && msg.Role != chat.RoleAssistant && msg.Role != chat.RoleSystem {
			return nil, badParam("messages", "messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
		}
		text, err := anthropicContent("messages."+strconv.Itoa(i)+".content", msg.Content)
		if err != nil {
			return nil, err
		}
		final := i == len(req.Messages)-1 && msg.Role == chat.RoleAssistant
		if text == "" && !final {
			return nil, badParam("messages", "messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		if final && strings.TrimRightFunc(text, unicode.IsSpace) != text {
			return nil, badParam("messages", "final assistant content cannot end with trailing whitespace")
		}
		if n := len(out); n > 0 && out[n-1].Role == msg.Role {
			out[n-1].Content += "\n\n" + text
			continue
		}
		out = append(out, chat.Message{Role: msg.Role, Content: text})
	}
	return out, nil
}

// anthropicContent reads content: a string, or an array of text blocks.
// Other block types (image, document, tool_use, tool_result, thinking …)
// are refused: the server runs text models and does not call tools.
func anthropicContent(field string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if field == "system" {
			return "", nil
		}
		return "", badParam(field, "%s: Field required", field)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", badParam(field, "%s: invalid string", field)
		}
		return s, nil
	}
	var blocks []anthropicBlock
	if raw[0] != '[' || json.Unmarshal(raw, &blocks) != nil {
		return "", badParam(field, "%s: Input should be a valid string or a list of content blocks", field)
	}
	parts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", badParam(field, "%s.%d: content blocks of type %q are not supported (text only)", field, i, b.Type)
		}
		if b.Text == nil {
			return "", badParam(field, "%s.%d.text: Field required", field, i)
		}
		parts = append(parts, *b.Text)
	}
	return strings.Join(parts, "\n\n"), nil
}

// anthropicStopReason names how a generation ended. A full context is
// reported as max_tokens: the reply was cut short, not finished.
func anthropicStopReason(out outcome) (string, *string) {
	switch {
	case out.StopWord != "":
		w := out.StopWord
		return "stop_sequence", &w
	case out.Finish == "length":
		return "max_tokens", nil
	}
	return "end_turn", nil
}

// anthropicUsageOf counts tokens as Anthropic bills them: input_tokens are
// the prompt tokens not read from the prefix cache, cache_read_input_tokens
// those that were; the prompt is their sum.
func anthropicUsageOf(g *genSpec, out outcome) anthropicUsage {
	cached := min(out.Result.CachedTokens, len(g.Prompt))
	return anthropicUsage{InputTokens: len(g.Prompt) - cached, OutputTokens: out.Completed, CacheReadInputTokens: cached}
}
