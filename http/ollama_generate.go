package http

import (
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// ollamaJob is a validated Ollama request: what to generate and how to
// answer. A job with no task.Request is a load (or unload) request, answered at
// once: the model is always loaded.
type ollamaJob struct {
	model  *Model // the served model, or a copy narrowed to num_ctx
	g      *task.Request
	name   string // the model name as the client spelled it, echoed back
	stream bool
	chat   bool // answer in /api/chat's shape
	// context: return the prompt and reply tokens as "context" for the
	// next /api/generate call (Ollama does for non-raw prompts).
	context    bool
	loadReason string // "load" or "unload" when g is nil
	start      time.Time
}

// ollamaGenerate serves POST /api/generate.
func (s *Server) ollamaGenerate(ctx *fasthttp.RequestCtx, m *Model) error {
	start := time.Now()
	var req ollamaGenerateRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	job, err := s.ollamaGenerateJob(ctx, m, &req)
	if err != nil {
		return err
	}
	job.start = start
	return s.runOllama(ctx, job)
}

// ollamaGenerateJob validates a generate request and renders its prompt:
// a suffix makes it a FIM request in the model's own FIM format (class
// FIM, whatever raw says: the chat template plays no part in FIM); raw
// sends the prompt as it is; otherwise the prompt becomes a user message
// (after system, when given) rendered with the model's chat template.
// Ollama renders its Go template there; this server has the model's own
// Jinja template from the GGUF, which is what the model was trained with
// and what every other API here renders, so the same conversation gives
// the same tokens on every API.
func (s *Server) ollamaGenerateJob(ctx *fasthttp.RequestCtx, m *Model, req *ollamaGenerateRequest) (*ollamaJob, error) {
	if err := ollamaCheckModel(req.Model); err != nil {
		return nil, err
	}
	if err := ollamaCheckGenerate(req); err != nil {
		return nil, err
	}
	shape, err := wire.OllamaFormat(req.Format)
	if err != nil {
		return nil, err
	}
	opts, err := parseOllamaOptions(req.Options)
	if err != nil {
		return nil, err
	}
	job := &ollamaJob{name: req.Model, stream: req.Stream == nil || *req.Stream}
	if req.Prompt == "" && req.Suffix == "" {
		job.loadReason = loadReason(req.KeepAlive)
		return job, nil
	}
	job.model = opts.window(m)
	p, err := s.ollamaGeneratePrompt(ctx, m, job.model, req, &opts)
	if err != nil {
		return nil, err
	}
	job.context = p.context
	job.g, err = ollamaSpec(m, job.model, &opts, p.tokens, p.class, req.Logprobs, req.TopLogs)
	if err != nil {
		return nil, err
	}
	job.g.StopTokens = p.stops
	// Only a templated prompt has the template's reasoning block.
	if job.g.Grammar, err = wire.GrammarFor(&m.Model, shape, p.tokens, p.context); err != nil {
		return nil, err
	}
	job.g.GrammarField = shape.Field
	return job, nil
}

// ollamaCheckGenerate refuses what /api/generate asks for and the server
// cannot do, in Ollama's words where Ollama has them.
func ollamaCheckGenerate(req *ollamaGenerateRequest) error {
	if err := ollamaCheckCommon(req.KeepAlive, req.TopLogs); err != nil {
		return err
	}
	// Thinking is honoured on /api/chat, where the reply is parsed into
	// thinking and content; here it is refused, as Ollama refuses it for a
	// model without the thinking capability.
	if on, _, err := ollamaThink(req.Think); err != nil {
		return err
	} else if on != nil && *on {
		return wire.BadParam("think", "%q does not support thinking on /api/generate; use /api/chat", req.Model)
	}
	if hasItems(req.Images) {
		return wire.BadParam("images", "%q does not support images: this server runs text models only", req.Model)
	}
	if req.Template != "" {
		return wire.BadParam("template", "template overrides are not supported: render the prompt yourself and send it with \"raw\": true")
	}
	if req.Raw && (req.System != "" || len(req.Context) > 0) {
		return wire.BadRequest("raw mode does not support template, system, or context")
	}
	return nil
}

// ollamaPrompt is a generate request's prompt and what goes with it.
type ollamaPrompt struct {
	tokens  []engine.Token
	class   sched.Class
	stops   []engine.Token // FIM markers that end a completion
	context bool           // answer with "context" (templated prompts)
}

// ollamaGeneratePrompt builds the prompt in windowed's context: FIM for a
// suffix (class FIM whatever the request names), else raw or templated in
// the request's class.
func (s *Server) ollamaGeneratePrompt(ctx *fasthttp.RequestCtx, m, windowed *Model, req *ollamaGenerateRequest, opts *ollamaOptions) (ollamaPrompt, error) {
	if req.Suffix != "" {
		if m.FIM == nil || !m.FIM.Capable() {
			// Ollama's answer for a model without the insert capability.
			return ollamaPrompt{}, wire.BadParam("suffix", "%q does not support insert", req.Model)
		}
		toks, _, err := wire.FIMPrompt(&windowed.Model, fim.Request{Prefix: req.Prompt, Suffix: req.Suffix}, opts.maxTokens(m, m, 0))
		return ollamaPrompt{tokens: toks, class: sched.FIM, stops: m.FIMStops()}, err
	}
	class, err := s.requestClass(ctx, "")
	if err != nil {
		return ollamaPrompt{}, err
	}
	if req.Raw {
		toks, err := ollamaRawPrompt(windowed, req.Prompt)
		return ollamaPrompt{tokens: toks, class: class}, err
	}
	toks, err := ollamaTemplatedPrompt(windowed, req)
	return ollamaPrompt{tokens: toks, class: class, context: true}, err
}

// ollamaSpec completes a job's generation from its options.
func ollamaSpec(m, windowed *Model, opts *ollamaOptions, prompt []engine.Token, class sched.Class, logprobs bool, top int) (*task.Request, error) {
	smp, err := opts.sampling(m)
	if err != nil {
		return nil, err
	}
	g := &task.Request{Spec: task.Spec{Prompt: prompt, Class: class, MaxTokens: opts.maxTokens(m, windowed, len(prompt)), Sampling: smp, Stop: opts.Stop}}
	if logprobs {
		g.Logprobs, g.TopLogprobs = max(top, 1), top
	}
	return g, nil
}

func ollamaRawPrompt(m *Model, text string) ([]engine.Token, error) {
	prompt, err := wire.Tokenize(&m.Model, text, true)
	if err != nil {
		return nil, err
	}
	return prompt, wire.CheckPrompt(&m.Model, prompt)
}

// ollamaTemplatedPrompt renders system and prompt as a conversation. The
// deprecated "context" (tokens a previous response returned) goes in front
// as tokens, so a continued conversation reuses its cached prefix exactly.
func ollamaTemplatedPrompt(m *Model, req *ollamaGenerateRequest) ([]engine.Token, error) {
	var msgs []chat.Message
	if req.System != "" {
		msgs = append(msgs, chat.Message{Role: chat.RoleSystem, Content: req.System})
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: req.Prompt})
	if len(req.Context) == 0 {
		return wire.Result(task.RenderChat(&m.Model, msgs))
	}
	prev, err := contextTokens(m, req.Context)
	if err != nil {
		return nil, err
	}
	if m.Chat == nil {
		return nil, wire.Convert(task.NoChatTemplate(&m.Model, `send the prompt with "raw": true`))
	}
	text, err := wire.Result(task.ChatPrompt(&m.Model, chat.Request{Messages: msgs, AddGenerationPrompt: true}))
	if err != nil {
		return nil, err
	}
	next, err := wire.Tokenize(&m.Model, text, false)
	if err != nil {
		return nil, err
	}
	prompt := append(prev, next...)
	return prompt, wire.CheckPrompt(&m.Model, prompt)
}

// contextTokens checks "context": token ids of this model's vocabulary.
func contextTokens(m *Model, ids []int64) ([]engine.Token, error) {
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
