package ollama

import (
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// job is a validated Ollama request: what to generate and how to answer.
// A job with no task.Request is a load (or unload) request, answered at
// once: the model is always loaded.
type job struct {
	model  *task.Model // the served model, or a copy narrowed to num_ctx
	req    *task.Request
	name   string // the model name as the client spelled it, echoed back
	stream bool
	chat   bool // answer in /api/chat's shape
	// context: return the prompt and reply tokens as "context" for the
	// next /api/generate call (Ollama does for non-raw prompts).
	context    bool
	loadReason string // "load" or "unload" when req is nil
	start      time.Time
}

// generate serves POST /api/generate.
func (a *api) generate(ctx *fasthttp.RequestCtx, m *task.Model) error {
	start := time.Now()
	var req generateRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	j, err := a.generateJob(ctx, m, &req)
	if err != nil {
		return err
	}
	j.start = start
	return a.answer(ctx, j)
}

// generateJob validates a generate request and renders its prompt: a
// suffix makes it a FIM request in the model's own FIM format (class FIM,
// whatever raw says: the chat template plays no part in FIM); raw sends
// the prompt as it is; otherwise the prompt becomes a user message (after
// system, when given) rendered with the model's chat template. Ollama
// renders its Go template there; this server has the model's own Jinja
// template from the GGUF, which is what the model was trained with and
// what every other API here renders, so the same conversation gives the
// same tokens on every API.
// A job with images holds a reference to them (j.req.Media) that answer
// drops once it has submitted the job.
func (a *api) generateJob(ctx *fasthttp.RequestCtx, m *task.Model, req *generateRequest) (_ *job, err error) {
	if err := checkModel(req.Model); err != nil {
		return nil, err
	}
	if err := checkGenerate(req); err != nil {
		return nil, err
	}
	shape, err := wire.OllamaFormat(req.Format)
	if err != nil {
		return nil, err
	}
	opts, err := parseOptions(req.Options)
	if err != nil {
		return nil, err
	}
	j := &job{name: req.Model, stream: req.Stream == nil || *req.Stream}
	if req.Prompt == "" && req.Suffix == "" {
		j.loadReason = loadReason(req.KeepAlive)
		return j, nil
	}
	j.model = opts.window(m)
	var p prompt
	var mp *task.MediaPrompt
	if hasItems(req.Images) {
		if p, mp, err = a.imagePrompt(ctx, j.model, req); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				mp.Close()
			}
		}()
	} else if p, err = a.generatePrompt(ctx, m, j.model, req, &opts); err != nil {
		return nil, err
	}
	j.context = p.context
	j.req, err = newRequest(m, j.model, &opts, p.tokens, p.class, req.Logprobs, req.TopLogs)
	if err != nil {
		return nil, err
	}
	j.req.Media = mp
	j.req.StopTokens = p.stops
	// Only a templated prompt has the template's reasoning block.
	if j.req.Grammar, err = task.GrammarFor(m, shape, p.tokens, p.context); err != nil {
		return nil, err
	}
	j.req.GrammarField = shape.Field
	return j, nil
}

// checkGenerate refuses what /api/generate asks for and the server cannot
// do, in Ollama's words where Ollama has them.
func checkGenerate(req *generateRequest) error {
	if err := checkCommon(req.KeepAlive, req.TopLogs); err != nil {
		return err
	}
	// Thinking is honoured on /api/chat, where the reply is parsed into
	// thinking and content; here it is refused, as Ollama refuses it for a
	// model without the thinking capability.
	if on, _, err := readThink(req.Think); err != nil {
		return err
	} else if on != nil && *on {
		return wire.BadParam("think", "%q does not support thinking on /api/generate; use /api/chat", req.Model)
	}
	if hasItems(req.Images) && (req.Raw || req.Suffix != "" || len(req.Context) > 0) {
		return wire.BadParam("images", "images are taken with a templated prompt only (not with raw, suffix or context)")
	}
	if req.Template != "" {
		return wire.BadParam("template", "template overrides are not supported: render the prompt yourself and send it with \"raw\": true")
	}
	if req.Raw && (req.System != "" || len(req.Context) > 0) {
		return wire.BadRequest("raw mode does not support template, system, or context")
	}
	return nil
}

// prompt is a generate request's prompt and what goes with it.
type prompt struct {
	tokens  []engine.Token
	class   sched.Class
	stops   []engine.Token // FIM markers that end a completion
	context bool           // answer with "context" (templated prompts)
}

// generatePrompt builds the prompt in windowed's context: FIM for a
// suffix (class FIM whatever the request names), else raw or templated in
// the request's class.
func (a *api) generatePrompt(ctx *fasthttp.RequestCtx, m, windowed *task.Model, req *generateRequest, opts *options) (prompt, error) {
	if req.Suffix != "" {
		if m.FIM == nil || !m.FIM.Capable() {
			// Ollama's answer for a model without the insert capability.
			return prompt{}, wire.BadParam("suffix", "%q does not support insert", req.Model)
		}
		toks, _, err := task.FIMPrompt(windowed, fim.Request{Prefix: req.Prompt, Suffix: req.Suffix}, opts.maxTokens(m, m, 0))
		return prompt{tokens: toks, class: sched.FIM, stops: m.FIMStops()}, err
	}
	class, err := a.host.Class(ctx, "")
	if err != nil {
		return prompt{}, err
	}
	if req.Raw {
		toks, err := rawPrompt(windowed, req.Prompt)
		return prompt{tokens: toks, class: class}, err
	}
	toks, err := templatedPrompt(windowed, req)
	return prompt{tokens: toks, class: class, context: true}, err
}

// newRequest is a job's generation from its options.
func newRequest(m, windowed *task.Model, opts *options, prompt []engine.Token, class sched.Class, logprobs bool, top int) (*task.Request, error) {
	smp, err := opts.sampling(m)
	if err != nil {
		return nil, err
	}
	r := &task.Request{Spec: task.Spec{Prompt: prompt, Class: class, MaxTokens: opts.maxTokens(m, windowed, len(prompt)), Sampling: smp, Stop: opts.Stop}}
	if logprobs {
		r.Logprobs, r.TopLogprobs = max(top, 1), top
	}
	return r, nil
}

func rawPrompt(m *task.Model, text string) ([]engine.Token, error) {
	toks, err := task.Tokenize(m, text, true)
	if err != nil {
		return nil, err
	}
	return toks, task.CheckPrompt(m.Desc, toks)
}

// templatedPrompt renders system and prompt as a conversation. The
// deprecated "context" (tokens a previous response returned) goes in front
// as tokens, so a continued conversation reuses its cached prefix exactly.
func templatedPrompt(m *task.Model, req *generateRequest) ([]engine.Token, error) {
	var msgs []chat.Message
	if req.System != "" {
		msgs = append(msgs, chat.Message{Role: chat.RoleSystem, Content: req.System})
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: req.Prompt})
	if len(req.Context) == 0 {
		return task.RenderChat(m, msgs)
	}
	prev, err := contextTokens(m, req.Context)
	if err != nil {
		return nil, err
	}
	if m.Chat == nil {
		return nil, wire.FromTask(task.NoChatTemplate(m, `send the prompt with "raw": true`))
	}
	text, err := task.ChatPrompt(m, chat.Request{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	next, err := task.Tokenize(m, text, false)
	if err != nil {
		return nil, err
	}
	toks := append(prev, next...)
	return toks, task.CheckPrompt(m.Desc, toks)
}

// contextTokens checks "context": token ids of this model's vocabulary.
func contextTokens(m *task.Model, ids []int64) ([]engine.Token, error) {
	if len(ids) >= m.Desc.Ctx {
		return nil, wire.FromTask(task.ContextExceededError(len(ids), m.Desc.Ctx))
	}
	out := make([]engine.Token, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(m.Desc.Vocab) {
			return nil, wire.BadParam("context", "context[%d] = %d is not a token of this model", i, id)
		}
		out[i] = engine.Token(id)
	}
	return out, nil
}

// imagePrompt renders a generate request with images as a user message of
// a media marker per image (before the prompt, as Ollama places them)
// after system, through the request core's media path. It answers with no
// "context": the tokens at an image's place are placeholders, not it.
func (a *api) imagePrompt(ctx *fasthttp.RequestCtx, m *task.Model, req *generateRequest) (prompt, *task.MediaPrompt, error) {
	imgs, err := readImages("images", req.Images, 0)
	if err != nil {
		return prompt{}, nil, wire.BadParam("images", "%v", err)
	}
	class, err := a.host.Class(ctx, "")
	if err != nil {
		return prompt{}, nil, err
	}
	if m.Chat == nil {
		return prompt{}, nil, wire.FromTask(task.NoChatTemplate(m, "images need the model's chat template"))
	}
	var msgs []chat.Message
	if req.System != "" {
		msgs = append(msgs, chat.Message{Role: chat.RoleSystem, Content: req.System})
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: strings.Repeat(task.MediaMarker+"\n", len(imgs)) + req.Prompt})
	text, err := task.ChatPrompt(m, chat.Request{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		return prompt{}, nil, err
	}
	mp, err := task.NewMediaPrompt(m, "images", text, imgs, true)
	if err != nil {
		return prompt{}, nil, err
	}
	return prompt{tokens: mp.Prompt, class: class}, mp, nil
}
