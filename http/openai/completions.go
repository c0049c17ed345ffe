package openai

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/fim"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
)

// OpenAI's legacy completions API, POST /v1/completions, as the openai
// clients and editor plugins (Continue, Tabby-style FIM clients) send it.
// A non-empty suffix makes the request fill in the middle in the model's
// own FIM format (class FIM); an empty or absent one is a plain
// continuation. best_of is accepted only equal to n: ranking extra
// candidates would cost best_of/n times the work for an answer clients
// rarely ask for. echo with logprobs is refused, since it asks for the
// prompt's logprobs, which the engine does not compute.

// Limits of the completions API.
const (
	maxCompletionChoices = 128 // prompts × n in one request
	maxLegacyLogprobs    = 5   // OpenAI's documented maximum for logprobs
)

type oaiCompletionRequest struct {
	Model            string             `json:"model"`
	Prompt           json.RawMessage    `json:"prompt"`
	Suffix           *string            `json:"suffix"`
	MaxTokens        *int               `json:"max_tokens"`
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`          // llama.cpp extension
	MinP             *float64           `json:"min_p"`          // llama.cpp extension
	RepeatPenalty    *float64           `json:"repeat_penalty"` // llama.cpp extension
	N                *int               `json:"n"`
	BestOf           *int               `json:"best_of"`
	Stream           bool               `json:"stream"`
	StreamOptions    *oaiStreamOptions  `json:"stream_options"`
	Logprobs         *int               `json:"logprobs"`
	Echo             bool               `json:"echo"`
	Stop             json.RawMessage    `json:"stop"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	User             string             `json:"user"`
	// Structured output: response_format and llama.cpp's json_schema, grammar.
	structuredFields
	// llama.cpp's extensions the server does not honour, to be refused.
	llamaUnhonoured
}

// oaiLegacyLogprobs is the completions API's logprobs object.
type oaiLegacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type oaiCompletionChoice struct {
	Text         string             `json:"text"`
	Index        int                `json:"index"`
	Logprobs     *oaiLegacyLogprobs `json:"logprobs"`
	FinishReason *string            `json:"finish_reason"` // null until a streamed choice ends
}

type oaiCompletion struct {
	ID                string                `json:"id"`
	Object            string                `json:"object"`
	Created           int64                 `json:"created"`
	Model             string                `json:"model"`
	SystemFingerprint string                `json:"system_fingerprint"`
	Choices           []oaiCompletionChoice `json:"choices"`
	Usage             *oaiUsage             `json:"usage,omitempty"`
}

// cmplChoice is one choice of a completions request: prompt p, sample j.
type cmplChoice struct {
	task.Outcome
	index    int
	prompt   int
	spec     *task.Spec
	echo     string // the prompt's text, when echo
	evalOnly bool   // max_tokens 0: the prompt is evaluated, nothing generated
	logprobs *oaiLegacyLogprobs
	offset   int // text_offset of the next token
}

// cmplPlan is a checked completions request.
type cmplPlan struct {
	job        *task.Job // once submitted
	key        string    // the completion-cache key, "" when it may not answer
	choices    []*cmplChoice
	promptLens []int
	logprobs   int // alternatives per token; -1: no logprobs
}

func (a *api) completions(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req oaiCompletionRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	plan, head, err := planCompletionRequest(m, &req, a.classingOf(ctx))
	if err != nil {
		return err
	}
	if req.Stream {
		return a.streamCompletions(ctx, m, plan, head, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	}
	cache := a.host.CompletionCache()
	if plan.fromCache(m, cache) {
		return wire.WriteJSON(ctx, plan.whole(head))
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	if err := plan.completeWhole(rctx, m, cache); err != nil {
		return err
	}
	return wire.WriteJSON(ctx, plan.whole(head))
}

// planCompletionRequest checks a request and renders its choices, and the
// head of its answer.
func planCompletionRequest(m *task.Model, req *oaiCompletionRequest, cls classing) (*cmplPlan, oaiCompletion, error) {
	class, err := cls.plain()
	if err != nil {
		return nil, oaiCompletion{}, err
	}
	plan, err := planCompletions(m, req, class)
	if err != nil {
		return nil, oaiCompletion{}, err
	}
	head := oaiCompletion{ID: wire.NewID("cmpl-"), Object: "text_completion", Created: unixNow(), Model: m.Name, SystemFingerprint: fingerprint(m)}
	return plan, head, nil
}

// whole is the answer of a plan whose choices all ended.
func (p *cmplPlan) whole(head oaiCompletion) *oaiCompletion {
	for _, c := range p.choices {
		if p.logprobs >= 0 && c.logprobs == nil {
			c.logprobs = newLegacyLogprobs() // nothing generated: empty, not null
		}
		finish := c.Finish
		head.Choices = append(head.Choices, oaiCompletionChoice{Text: c.echo + string(c.Text), Index: c.index, Logprobs: c.logprobs, FinishReason: &finish})
	}
	u := p.usage()
	head.Usage = &u
	return &head
}

// fromCache answers a suffix request the completion cache may answer
// (cacheKey) from there, when it holds the answer.
func (p *cmplPlan) fromCache(m *task.Model, cache *task.CompletionCache) bool {
	p.key = p.cacheKey(m)
	if p.key == "" || cache == nil {
		return false
	}
	hit, ok := cache.Get(p.key)
	if ok {
		p.choices[0].fromCache(hit)
	}
	return ok
}

// completeWhole runs every choice of a whole (not streamed) response to
// its end; an answer the completion cache may keep is remembered there.
func (p *cmplPlan) completeWhole(ctx context.Context, m *task.Model, cache *task.CompletionCache) error {
	if err := p.submit(ctx, m, true); err != nil {
		return err
	}
	if err := p.collect(ctx, m); err != nil {
		return err
	}
	if c := p.choices[0]; p.key != "" && cache != nil && (c.Finish == "stop" || c.Finish == "length") {
		cache.Put(task.Cached{Key: p.key, Text: string(c.Text), Tokens: c.Completed, Finish: c.Finish, StopWord: c.StopWord})
	}
	return nil
}

// cacheKey is the completion-cache key (task.CacheKey) of a whole request
// whose one choice is all text: no echo, no logprobs, something generated.
func (p *cmplPlan) cacheKey(m *task.Model) string {
	if len(p.choices) != 1 || p.logprobs >= 0 {
		return ""
	}
	c := p.choices[0]
	if c.echo != "" || c.evalOnly {
		return ""
	}
	return task.CacheKey(m, c.spec, "openai /v1/completions")
}

// fromCache fills c with a completion-cache answer: the whole prompt
// counts as cached and no work was done.
func (c *cmplChoice) fromCache(hit task.Cached) {
	n := len(c.spec.Prompt)
	c.Outcome = task.Outcome{Text: []byte(hit.Text), Finish: hit.Finish, StopWord: hit.StopWord, Completed: hit.Tokens,
		Result: sched.Result{PromptTokens: n, CachedTokens: n, Generated: hit.Tokens}}
}

// planCompletions checks a request and renders every choice's generation.
func planCompletions(m *task.Model, req *oaiCompletionRequest, class sched.Class) (*cmplPlan, error) {
	if err := req.llamaUnhonoured.Check(); err != nil {
		return nil, err
	}
	prompts, err := wire.ParsePrompts(req.Prompt, "prompt")
	if err != nil {
		return nil, wire.Convert(err)
	}
	if err := wire.RefusePromptImages(prompts, "prompt", "/v1/completions takes no images, as llama-server's does not; send them to /completion, or as image_url parts to /v1/chat/completions"); err != nil {
		return nil, err
	}
	n, err := choiceCount(req.N)
	if err != nil {
		return nil, err
	}
	if req.BestOf != nil && *req.BestOf != n {
		return nil, wire.BadParam("best_of", "best_of must equal n (%d): ranking extra candidates is not supported", n)
	}
	if len(prompts)*n > maxCompletionChoices {
		return nil, wire.BadParam("n", "%d prompts × n %d is more than %d choices", len(prompts), n, maxCompletionChoices)
	}
	g, err := completionSpec(m, req, class)
	if err != nil {
		return nil, err
	}
	plan := &cmplPlan{logprobs: -1}
	if req.Logprobs != nil {
		plan.logprobs = *req.Logprobs
	}
	fill := req.Suffix != nil && *req.Suffix != ""
	for p, pieces := range prompts {
		prompt, err := completionPrompt(m, pieces, req, fill, g.MaxTokens)
		if err != nil {
			return nil, err
		}
		plan.promptLens = append(plan.promptLens, len(prompt))
		for j := range n {
			spec := g.WithSeed(j)
			c := &cmplChoice{index: p*n + j, prompt: p, spec: &spec, evalOnly: req.MaxTokens != nil && *req.MaxTokens == 0}
			c.spec.Prompt = prompt
			if fill {
				c.spec.Class, c.spec.StopTokens = sched.FIM, m.FIMStops()
			}
			if c.evalOnly {
				c.spec.MaxTokens, c.spec.Sampling, c.spec.Stop, c.spec.Bias, c.spec.Logprobs, c.spec.Grammar = 1, engine.Greedy(), nil, nil, 0, nil
			}
			if req.Echo {
				c.echo = wire.PromptText(m, pieces, prompt)
			}
			plan.choices = append(plan.choices, c)
		}
	}
	return plan, nil
}

// completionSpec reads the parameters every choice shares.
func completionSpec(m *task.Model, req *oaiCompletionRequest, class sched.Class) (*task.Spec, error) {
	limit := req.MaxTokens
	if limit == nil {
		def := 16 // OpenAI's default
		limit = &def
	}
	maxTok, err := task.MaxTokens("max_tokens", limit, m.Desc.Ctx)
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
	g := &task.Spec{Class: class, MaxTokens: maxTok, Sampling: smp, Stop: stops}
	if g.LoRA, err = req.LoRAField.Scales(m); err != nil {
		return nil, err
	}
	if g.Bias, err = logitBias(m, req.LogitBias); err != nil {
		return nil, err
	}
	shape, err := req.structuredFields.Constraint(m)
	if err != nil {
		return nil, err
	}
	// Completion prompts are the client's text, not a rendered
	// conversation: no reasoning block to wait for.
	if g.Grammar, err = task.GrammarFor(m, shape, nil, false); err != nil {
		return nil, wire.Convert(err)
	}
	g.GrammarField = shape.Field
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > maxLegacyLogprobs {
			return nil, wire.BadParam("logprobs", "logprobs must be between 0 and %d", maxLegacyLogprobs)
		}
		if req.Echo {
			return nil, wire.BadParam("echo", "echo with logprobs asks for the prompt's logprobs, which this server does not compute")
		}
		g.Logprobs, g.TopLogprobs = max(*req.Logprobs, 1), *req.Logprobs
	}
	return g, nil
}

// completionPrompt renders one prompt: plain, or with the suffix in the
// model's FIM format.
func completionPrompt(m *task.Model, pieces []wire.PromptPiece, req *oaiCompletionRequest, fill bool, maxTok int) ([]engine.Token, error) {
	if !fill {
		toks, err := wire.PromptTokens(m, pieces, "prompt")
		if err != nil {
			return nil, wire.Convert(err)
		}
		return toks, wire.Convert(task.CheckPrompt(m.Desc, toks))
	}
	if len(pieces) != 1 || !pieces[0].IsText {
		return nil, wire.BadParam("suffix", "suffix needs text prompts, not token ids")
	}
	toks, _, err := task.FIMPrompt(m, fim.Request{Prefix: pieces[0].Text, Suffix: *req.Suffix}, maxTok)
	if err != nil {
		return nil, wire.Convert(err)
	}
	return toks, wire.Convert(task.CheckPrompt(m.Desc, toks))
}

// submit hands every choice to the scheduler before any is followed, with
// the core's one rollback (task.Start); collect whole answers' text.
func (p *cmplPlan) submit(ctx context.Context, m *task.Model, collect bool) error {
	req := &task.Request{Choices: make([]*task.Spec, len(p.choices)), Collect: collect, Part: "choice"}
	for i, c := range p.choices {
		req.Choices[i] = c.spec
	}
	job, err := task.Start(ctx, m, req)
	p.job = job
	return err
}

// run follows every choice at once to its end (task.Job.Run); a failed
// choice cancels the others, since the response is the failure. emit, when
// not nil, sees each delta of a choice that generates.
func (p *cmplPlan) run(ctx context.Context, emit func(c *cmplChoice, d *task.Delta) error, ended func(c *cmplChoice) error, failed func(error)) error {
	_, err := wire.RunJob(ctx, p.job, task.SinkFuncs{
		OnDelta: func(i int, _ []reply.Event, d *task.Delta) error {
			if c := p.choices[i]; emit != nil && !c.evalOnly {
				return emit(c, d)
			}
			return nil
		},
		OnEnded: func(i int, t *task.Turn) error {
			c := p.choices[i]
			if err := c.end(t.Outcome); err != nil {
				return err
			}
			if ended != nil {
				return ended(c)
			}
			return nil
		},
		OnFailed: failed,
	})
	return err
}

// collect runs every choice to its end, gathering text and logprobs.
func (p *cmplPlan) collect(ctx context.Context, m *task.Model) error {
	return p.run(ctx, func(c *cmplChoice, d *task.Delta) error { c.addLogprobs(m, d, p.logprobs); return nil }, nil, nil)
}

// end takes in how the choice's generation ended.
func (c *cmplChoice) end(out task.Outcome) error {
	c.Outcome = out
	if errors.Is(out.Result.Err, sched.ErrClosed) {
		return wire.Unavailable("the server is shutting down")
	}
	if c.evalOnly {
		c.Text, c.Completed, c.Finish = nil, 0, "length"
	}
	return nil
}

// addLogprobs appends a delta's tokens to the legacy logprobs object: each
// token's text, its logprob, the top alternatives by text (always with the
// token itself, as llama.cpp does) and its byte offset in the choice text.
func (c *cmplChoice) addLogprobs(m *task.Model, d *task.Delta, n int) {
	if n < 0 {
		return
	}
	if c.logprobs == nil {
		c.logprobs = newLegacyLogprobs()
	}
	appendLegacyLogprobs(m, c.logprobs, d.Tokens, n, &c.offset)
}

// newLegacyLogprobs is an empty logprobs object (arrays, never null).
func newLegacyLogprobs() *oaiLegacyLogprobs {
	return &oaiLegacyLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
}

// appendLegacyLogprobs adds tokens to lp; offset is the next token's byte
// offset in the text.
func appendLegacyLogprobs(m *task.Model, lp *oaiLegacyLogprobs, toks []task.TokenOut, n int, offset *int) {
	for i := range toks {
		t := &toks[i]
		text := wire.ValidText(t.Piece)
		top := make(map[string]float64, n+1)
		task.EachTop(m, t, n, func(_ engine.Token, piece []byte, logprob float32) {
			top[wire.ValidText(piece)] = wire.FiniteLogprob(logprob)
		})
		if _, ok := top[text]; !ok {
			top[text] = wire.FiniteLogprob(t.Logprob)
		}
		lp.Tokens = append(lp.Tokens, text)
		lp.TokenLogprobs = append(lp.TokenLogprobs, wire.FiniteLogprob(t.Logprob))
		lp.TopLogprobs = append(lp.TopLogprobs, top)
		lp.TextOffset = append(lp.TextOffset, *offset)
		*offset += len(t.Piece)
	}
}

// usage counts each prompt once and every choice's tokens.
func (p *cmplPlan) usage() oaiUsage {
	u := oaiUsage{PromptTokensDetails: &oaiPromptDetails{}}
	for _, n := range p.promptLens {
		u.PromptTokens += n
	}
	seen := make([]bool, len(p.promptLens))
	for _, c := range p.choices {
		u.CompletionTokens += c.Completed
		if !seen[c.prompt] {
			seen[c.prompt] = true
			u.PromptTokensDetails.CachedTokens += c.Result.CachedTokens
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// streamCompletions streams text_completion chunks per choice (the echo
// first, then each delta), a chunk with each choice's finish_reason, the
// usage chunk when asked, and "data: [DONE]". A failed write cancels every
// choice.
func (a *api) streamCompletions(ctx *fasthttp.RequestCtx, m *task.Model, plan *cmplPlan, head oaiCompletion, includeUsage bool) error {
	chunk := func(c oaiCompletionChoice) oaiCompletion {
		h := head
		h.Choices = []oaiCompletionChoice{c}
		return h
	}
	return a.host.Stream(ctx, true, func(rctx context.Context) error {
		return plan.submit(rctx, m, false)
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		for _, c := range plan.choices {
			if c.echo != "" {
				if ew.Send("", chunk(oaiCompletionChoice{Text: c.echo, Index: c.index})) != nil {
					return
				}
			}
		}
		plan.run(rctx, func(c *cmplChoice, d *task.Delta) error {
			ch := oaiCompletionChoice{Text: string(d.Text), Index: c.index}
			if plan.logprobs >= 0 {
				ch.Logprobs = newLegacyLogprobs()
				appendLegacyLogprobs(m, ch.Logprobs, d.Tokens, plan.logprobs, &c.offset)
			}
			return ew.Send("", chunk(ch))
		}, func(c *cmplChoice) error {
			finish := c.Finish
			return ew.Send("", chunk(oaiCompletionChoice{Index: c.index, FinishReason: &finish}))
		}, ew.FailAll(cancel))
		if rctx.Err() != nil {
			return
		}
		if includeUsage {
			u := plan.usage()
			h := head
			h.Choices, h.Usage = []oaiCompletionChoice{}, &u
			ew.Send("", h)
		}
		ew.Raw("data: [DONE]\n\n")
	})
}
