// Package anthropic is Anthropic's Messages API (/v1/messages and
// /v1/messages/count_tokens), so that the Anthropic SDKs and the agents
// built on them can run against a local model. The anthropic-version and
// anthropic-beta headers are accepted and not checked: there is one
// behaviour, the one described here. A request is decoded into a
// task.Request, handed to the request core, and its turn rendered as one
// message or as Anthropic's server-sent events (stream.go); cache_control
// breakpoints pin prompt prefixes in the model's prefix cache (cache.go).
package anthropic

import (
	"encoding/json"
	"math"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/reply"
	"superfluid/task"
)

// api is the Messages API's handlers over the server that mounts them.
type api struct{ host wire.Host }

// Routes are the Anthropic API's routes on h.
func Routes(h wire.Host) []wire.Route {
	a := &api{host: h}
	return []wire.Route{
		{Method: "POST", Path: "/v1/messages", API: wire.Anthropic, Handle: a.messages, Generates: true},
		{Method: "POST", Path: "/v1/messages/count_tokens", API: wire.Anthropic, Handle: a.countTokens},
	}
}

// messages serves POST /v1/messages: the reply as one message, or
// streamed as server-sent events when "stream" is true.
func (a *api) messages(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req request
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	p, err := a.prepare(ctx, m, &req)
	if err != nil {
		return err
	}
	// Submitted by the time the answer returns (a stream's start runs
	// before it answers).
	defer p.g.Media.Close()
	pinMarked(a.host.Pinner(ctx), p.g.Media.Keyed(p.g.Prompt), p.breaks, p.marks)
	id := wire.NewID("msg_")
	if req.Stream {
		return a.stream(ctx, m, p, id, req.Model)
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	job, err := task.Start(rctx, m, p.g)
	if err != nil {
		return err
	}
	var evs []reply.Event
	out, err := wire.FollowOne(rctx, job, func(e []reply.Event, _ *task.Delta) error { evs = append(evs, e...); return nil })
	if err != nil {
		return err
	}
	reason, seq := stopReason(out)
	return wire.WriteJSON(ctx, response{
		ID: id, Type: "message", Role: "assistant", Model: req.Model,
		Content: contentOf(evs, p.omitThinking), StopReason: &reason, StopSequence: seq,
		Usage: usageOf(len(p.g.Prompt), p.marked(), out.Outcome),
	})
}

// countTokens answers /v1/messages/count_tokens with the prompt's length
// in this model's tokens, rendered exactly as /v1/messages would.
func (a *api) countTokens(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req request
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	if err := checkModel(req.Model); err != nil {
		return err
	}
	turn, _, err := a.readTurn(m, &req, countTokensLimit)
	if err != nil {
		return err
	}
	if err := wire.FetchMedia(ctx, a.host, m, turn.Images, turn.remote); err != nil {
		return err
	}
	plan, err := task.PlanChat(m, &turn.Chat)
	if err != nil {
		return err
	}
	plan.Close() // counted, never submitted
	return wire.WriteJSON(ctx, map[string]int{"input_tokens": len(plan.Prompt)})
}

// countTokensLimit stands for max_tokens in count_tokens, which takes
// none: thinking's budget is checked against no limit.
const countTokensLimit = math.MaxInt

// MaxStops is Anthropic's own bound on stop_sequences: it keeps its older
// 64 where the other APIs take task.MaxStops.
const MaxStops = 64

// prepared is a Messages request made ready to submit.
type prepared struct {
	g *task.Request
	// breaks are the request's cache breakpoints and marks the prompt
	// length each marks.
	breaks []cacheBreak
	marks  []int
	// omitThinking: thinking blocks carry their signature, not their text.
	omitThinking bool
}

// marked is the longest marked prefix.
func (p *prepared) marked() int {
	n := 0
	for _, k := range p.marks {
		n = max(n, k)
	}
	return n
}

// prepare validates a Messages request and plans its turn. A request with
// images holds a reference to them (g.Media) that the caller drops once it
// has submitted g.
func (a *api) prepare(ctx *fasthttp.RequestCtx, m *task.Model, req *request) (_ *prepared, err error) {
	if err := checkModel(req.Model); err != nil {
		return nil, err
	}
	if req.MaxTokens == nil {
		return nil, wire.BadParam("max_tokens", "max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return nil, wire.BadParam("max_tokens", "max_tokens: must be at least 1")
	}
	maxTok, err := task.MaxTokens("max_tokens", req.MaxTokens, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	if req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 1) {
		return nil, wire.BadParam("temperature", "temperature: must be between 0 and 1")
	}
	smp, err := task.Sampling(m, task.SamplingFields{Temperature: req.Temperature, DefaultTemperature: 1, TopK: req.TopK, TopP: req.TopP})
	if err != nil {
		return nil, err
	}
	if err := task.CheckStops("stop_sequences", req.StopSequences, MaxStops); err != nil {
		return nil, err
	}
	turn, breaks, err := a.readTurn(m, req, *req.MaxTokens)
	if err != nil {
		return nil, err
	}
	if err := wire.FetchMedia(ctx, a.host, m, turn.Images, turn.remote); err != nil {
		return nil, err
	}
	plan, err := task.PlanChat(m, &turn.Chat)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			plan.Close()
		}
	}()
	class, err := wire.TurnClass(ctx, a.host, &turn.Chat)
	if err != nil {
		return nil, err
	}
	g := &task.Request{Spec: task.Spec{Class: class, MaxTokens: maxTok, Sampling: smp, Stop: req.StopSequences}}
	plan.Apply(&g.Spec)
	p := &prepared{g: g, breaks: breaks, omitThinking: turn.omitThinking}
	if len(breaks) > 0 {
		p.marks = markedPrefixes(m, turn.conv, turn.Tools, breaks, plan.Media.Keyed(plan.Prompt), plan.Media)
	}
	return p, nil
}

// chatTurn is a request's turn with what the Anthropic side keeps of it.
type chatTurn struct {
	task.Chat
	conv         conversation
	omitThinking bool
	// remote are the images to fetch into Chat.Images (wire.FetchMedia).
	remote []media.Remote
}

// readTurn reads the request's conversation, tools and thinking into a
// chat turn, with its cache breakpoints.
func (a *api) readTurn(m *task.Model, req *request, maxTokens int) (chatTurn, []cacheBreak, error) {
	var t chatTurn
	if err := wire.RefuseUnhonoured(
		wire.Unhonoured{Name: "mcp_servers", Raw: req.MCPServers, Neutral: wire.EmptyValue, Why: "this server connects to no MCP servers; declare their tools in tools"},
	); err != nil {
		return t, nil, err
	}
	shape, err := wire.AnthropicFormat(outputConfigFormat(req), req.OutputFormat)
	if err != nil {
		return t, nil, err
	}
	tools, toolMarks, toolTTLs, err := readTools(req)
	if err != nil {
		return t, nil, err
	}
	think, omit, err := thinkingOf(req.Thinking, maxTokens)
	if err != nil {
		return t, nil, err
	}
	if t.conv, err = parseTurns(req, a.host.Settings().KeepBillingHeader); err != nil {
		return t, nil, err
	}
	msgs, err := t.conv.chat(false)
	if err != nil {
		return t, nil, err
	}
	breaks, err := cacheBreaks(req, t.conv, toolMarks, toolTTLs)
	if err != nil {
		return t, nil, err
	}
	images, remote, err := t.conv.images()
	if err != nil {
		return t, nil, err
	}
	t.remote = remote
	t.Chat = task.Chat{Messages: msgs, Tools: tools, Think: think, Continues: true, Shape: shape, Images: images, ImageField: "messages"}
	t.omitThinking = omit
	return t, breaks, nil
}

func outputConfigFormat(req *request) json.RawMessage {
	if req.OutputConfig == nil {
		return nil
	}
	return req.OutputConfig.Format
}

// checkModel refuses a request that names no model, as the Anthropic API
// does; the route resolved a named one already.
func checkModel(name string) error {
	if name == "" {
		return wire.BadParam("model", "model: Field required")
	}
	return nil
}

// contentOf is a finished turn's events as content blocks, in
// the order the model wrote them, as the stream sends them: a run of
// reasoning is a thinking block, a run of text a text block, each call a
// tool_use block. A turn of nothing has one empty text block.
func contentOf(evs []reply.Event, omitThinking bool) []outBlock {
	var blocks []outBlock
	var thoughts []string // each thinking block's whole text
	last := func(kind string) *outBlock {
		if n := len(blocks); n > 0 && blocks[n-1].Type == kind {
			return &blocks[n-1]
		}
		return nil
	}
	for _, ev := range evs {
		switch {
		case ev.Kind == reply.Call:
			blocks = append(blocks, outBlock{Type: "tool_use", ID: wire.NewID("toolu_"), Name: ev.Call.Name, Input: callInput(ev.Call.Arguments)})
		case ev.Text == "":
		case ev.Kind == reply.Reasoning:
			if last("thinking") != nil {
				thoughts[len(thoughts)-1] += ev.Text
				continue
			}
			thoughts = append(thoughts, ev.Text)
			blocks = append(blocks, outBlock{Type: "thinking"})
		case ev.Kind == reply.Content:
			if b := last("text"); b != nil {
				*b.Text += ev.Text
				continue
			}
			text := ev.Text
			blocks = append(blocks, outBlock{Type: "text", Text: &text})
		}
	}
	k := 0
	for i := range blocks {
		if blocks[i].Type == "thinking" {
			blocks[i] = thinkingBlock(thoughts[k], omitThinking)
			k++
		}
	}
	if len(blocks) == 0 {
		empty := ""
		blocks = append(blocks, outBlock{Type: "text", Text: &empty})
	}
	return blocks
}

func thinkingBlock(thinking string, omit bool) outBlock {
	sig := thinkingSignature(thinking)
	if omit {
		thinking = ""
	}
	return outBlock{Type: "thinking", Thinking: &thinking, Signature: &sig}
}

// callInput is a call's arguments as a tool_use input: always an object.
func callInput(args json.RawMessage) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage(`{}`)
	}
	return args
}

// stopReason names how a turn ended: tool_use when the model
// stopped after calling. A full context is reported as max_tokens: the
// reply was cut short, not finished.
func stopReason(out wire.TurnOut) (string, *string) {
	switch {
	case out.StopWord != "":
		w := out.StopWord
		return "stop_sequence", &w
	case out.Finish == "length":
		return "max_tokens", nil
	case len(out.Calls) > 0:
		return "tool_use", nil
	}
	return "end_turn", nil
}
