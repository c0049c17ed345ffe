package openai

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/reply"
	"superfluid/task"
)

// logitBias reads OpenAI's {"token id": bias} map. A bias of -100 bans the
// token, as OpenAI documents it: it becomes -inf, so no temperature can
// bring the token back, and a map that bans every token is refused like
// the other APIs' (nothing could be generated).
func logitBias(m *task.Model, in map[string]float64) ([]engine.LogitBias, error) {
	if len(in) > task.MaxBiasEntries {
		return nil, wire.BadParam("logit_bias", "logit_bias names %d tokens; at most %d", len(in), task.MaxBiasEntries)
	}
	var out []engine.LogitBias
	for k, v := range in {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= m.Desc.Vocab {
			return nil, wire.BadParam("logit_bias", "logit_bias key %q is not a token id of this model", k)
		}
		if !(v >= -100 && v <= 100) {
			return nil, wire.BadParam("logit_bias", "logit_bias %v for token %d outside [-100, 100]", v, id)
		}
		bias := float32(v)
		if v == -100 {
			bias = float32(math.Inf(-1))
		}
		out = append(out, engine.LogitBias{Token: engine.Token(id), Bias: bias})
	}
	return out, wire.Convert(task.CheckBias(m.Desc, "logit_bias", out))
}

// choiceCount reads "n" (1–16).
func choiceCount(n *int) (int, error) {
	if n == nil {
		return 1, nil
	}
	if *n < 1 || *n > 16 {
		return 0, wire.BadParam("n", "n must be between 1 and 16")
	}
	return *n, nil
}

// fetchMedia fills a request's remote images (wire.FetchMedia under the
// request's transport, wire.FetchMediaWith for a batch line).
type fetchMedia func(images [][]byte, remote []media.Remote) error

// chatRequest reads a chat request into the core's request of n choices.
// A request with images holds a reference to them (g.Media) that the
// caller drops once it has submitted g (task.ChatPlan.Close).
func chatRequest(m *task.Model, req *oaiChatRequest, cls classing, fetch fetchMedia) (g *task.Request, err error) {
	if err := req.oaiUnhonoured.check(); err != nil {
		return nil, err
	}
	shape, err := req.structuredFields.Constraint(m)
	if err != nil {
		return nil, err
	}
	msgs, images, remote, err := wire.ChatMessagesMedia(req.Messages, task.MediaMarker)
	if err != nil {
		return nil, err
	}
	tools, err := req.toolFields.ReadTools()
	if err != nil {
		return nil, err
	}
	if err := fetch(images, remote); err != nil {
		return nil, err
	}
	turn := task.Chat{Messages: msgs, Tools: tools, Kwargs: req.ChatTemplateKwargs, Shape: shape, Images: images, ImageField: "messages"}
	if e := req.ReasoningEffort; e != nil {
		if err := wire.Convert(turn.SetEffort("reasoning_effort", *e)); err != nil {
			return nil, err
		}
	}
	plan, err := task.PlanChat(m, &turn)
	if err != nil {
		return nil, wire.Convert(err)
	}
	defer func() {
		if err != nil {
			plan.Close()
		}
	}()
	limit := req.MaxCompletionTokens
	field := "max_completion_tokens"
	if limit == nil {
		limit, field = req.MaxTokens, "max_tokens"
	}
	maxTok, err := task.MaxTokens(field, limit, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	n, err := choiceCount(req.N)
	if err != nil {
		return nil, err
	}
	smp, err := task.Sampling(m, task.SamplingFields{Temperature: req.Temperature, DefaultTemperature: 1, TopK: req.TopK, TopP: req.TopP, MinP: req.MinP,
		Seed: req.Seed, RepeatPenalty: req.RepeatPenalty, FrequencyPenalty: req.FrequencyPenalty, PresencePenalty: req.PresencePenalty})
	if err != nil {
		return nil, err
	}
	stops, err := wire.StopList(req.Stop, "stop")
	if err != nil {
		return nil, err
	}
	class, err := cls.chat(&turn)
	if err != nil {
		return nil, err
	}
	g = &task.Request{Spec: task.Spec{Class: class, MaxTokens: maxTok, Sampling: smp, Stop: stops}}
	if g.LoRA, err = req.LoRAField.Scales(m); err != nil {
		return nil, err
	}
	plan.Apply(&g.Spec)
	if req.Logprobs {
		top := 0
		if req.TopLogprobs != nil {
			top = *req.TopLogprobs
		}
		if top < 0 || top > engine.MaxLogprobs {
			return nil, wire.BadParam("top_logprobs", "top_logprobs must be between 0 and %d", engine.MaxLogprobs)
		}
		g.Logprobs = max(top, 1)
		g.TopLogprobs = top
	} else if req.TopLogprobs != nil && *req.TopLogprobs > 0 {
		return nil, wire.BadParam("top_logprobs", "top_logprobs needs logprobs: true")
	}
	if g.Bias, err = logitBias(m, req.LogitBias); err != nil {
		return nil, err
	}
	g.N = n
	return g, nil
}

func (a *api) chat(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req oaiChatRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	g, err := chatRequest(m, &req, a.classingOf(ctx), func(images [][]byte, remote []media.Remote) error {
		return wire.FetchMedia(ctx, a.host, m, images, remote)
	})
	if err != nil {
		return err
	}
	// Submitted by the time the answer returns (a stream's start runs
	// before it answers): each choice's job holds its own reference.
	defer g.Media.Close()
	id := wire.NewID("chatcmpl-")
	created := time.Now().Unix()
	if req.Stream {
		return a.streamChat(ctx, m, g, id, created, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	resp, err := chatWhole(rctx, m, g, id, created)
	if err != nil {
		return err
	}
	return wire.WriteJSON(ctx, resp)
}

// chatWhole runs every choice of g to its end and answers them whole.
func chatWhole(ctx context.Context, m *task.Model, g *task.Request, id string, created int64) (*oaiChatResponse, error) {
	g.Part = "choice"
	job, err := task.Start(ctx, m, g)
	if err != nil {
		return nil, err
	}
	outs := chatChoices(g.Choices)
	turns, err := wire.RunJob(ctx, job, task.SinkFuncs{OnDelta: func(i int, _ []reply.Event, d *task.Delta) error {
		if c := outs[i]; d != nil && c.spec.Logprobs > 0 {
			c.addLogprobs(m, d)
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	for i, t := range turns {
		outs[i].TurnOut = wire.TurnOutOf(t)
	}
	resp := &oaiChatResponse{ID: id, Object: "chat.completion", Created: created, Model: m.Name, SystemFingerprint: fingerprint(m)}
	for i, o := range outs {
		resp.Choices = append(resp.Choices, oaiChatChoice{
			Index: i, Message: o.message(), Logprobs: o.logprobs, FinishReason: o.FinishReason(),
		})
	}
	resp.Usage = usageOf(g, outs)
	return resp, nil
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
	wire.TurnOut
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

func (c *choiceOut) addLogprobs(m *task.Model, d *task.Delta) {
	if c.logprobs == nil {
		c.logprobs = &oaiLogprobs{Content: []oaiTokenLogprob{}}
	}
	for i := range d.Tokens {
		c.logprobs.Content = append(c.logprobs.Content, oaiTokenEntry(m, c.spec, &d.Tokens[i]))
	}
}

// oaiTokenEntry is one token's logprob entry: its text, its bytes (a token
// may be part of a character), and the top alternatives asked for.
func oaiTokenEntry(m *task.Model, g *task.Spec, t *task.TokenOut) oaiTokenLogprob {
	e := oaiTokenLogprob{Token: string(t.Piece), Logprob: float64(t.Logprob), Bytes: wire.ByteList(t.Piece), TopLogprobs: []oaiTopLogprob{}}
	task.EachTop(m, t, g.TopLogprobs, func(_ engine.Token, piece []byte, logprob float32) {
		e.TopLogprobs = append(e.TopLogprobs, oaiTopLogprob{Token: string(piece), Logprob: float64(logprob), Bytes: wire.ByteList(piece)})
	})
	return e
}

// chatTimings is the first choice's work in llama.cpp's timings: the
// prompt it prefilled beyond the cached prefix, the tokens it generated
// and how long each phase took.
func chatTimings(g *task.Request, outs []*choiceOut) wire.Timings {
	if len(outs) == 0 {
		return wire.Timings{}
	}
	res := outs[0].Result
	promptN := max(len(g.Prompt)-res.CachedTokens, 0)
	return wire.NewTimings(res.CachedTokens, promptN, wire.Milliseconds(res.Prefill), outs[0].Completed, wire.Milliseconds(res.Decode))
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
