package http

import (
	"encoding/json"
	"fmt"

	"github.com/valyala/fasthttp"

	"superfluid/fim"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// llamaInfill is POST /infill, what llama.vim and llama.vscode send: the
// text around the cursor and other files of the project, built into the
// model's FIM format, always in class FIM. Identical greedy whole-response
// requests are answered from the completion cache.
func (s *Server) llamaInfill(ctx *fasthttp.RequestCtx, m *Model) error {
	var req llamaRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	j, p, err := infillJob(m, &req)
	if err != nil {
		return err
	}
	if j.cacheKey != "" { // greedy and whole: the completion cache may hold it
		if c, ok := s.fimCache.Get(j.cacheKey); ok {
			return writeLlamaResults(ctx, m, []*llamaRun{cachedRun(j, p, c)}, p)
		}
	}
	if p.stream {
		return s.streamLlama(ctx, m, []*llamaJob{j}, p)
	}
	rctx, done := s.requestContext(ctx)
	defer done()
	runs, err := startRuns(rctx, m, []*llamaJob{j}, p)
	if err != nil {
		return err
	}
	if err := waitRuns(rctx, m, runs); err != nil {
		return err
	}
	r := runs[0]
	if j.cacheKey != "" && r.reproducible() {
		s.fimCache.Put(task.Cached{Key: j.cacheKey, Text: string(r.content), Tokens: r.predicted, Finish: r.stopType, StopWord: r.stopWord})
	}
	return writeLlamaResults(ctx, m, runs, p)
}

// infillJob checks an /infill request and builds its FIM prompt.
func infillJob(m *Model, req *llamaRequest) (*llamaJob, *llamaParams, error) {
	p, err := llamaOptions(m, req)
	if err != nil {
		return nil, nil, err
	}
	r, err := infillRequest(req)
	if err != nil {
		return nil, nil, err
	}
	prompt, info, err := wire.FIMPrompt(&m.Model, r, p.maxTokens)
	if err != nil {
		return nil, nil, err
	}
	if err := wire.CheckPrompt(&m.Model, prompt); err != nil {
		return nil, nil, err
	}
	j := p.newLlamaJob(0, prompt, sched.FIM)
	j.spec.StopTokens = m.FIMStops()
	j.truncated = info.Truncated()
	if !p.warmup && !p.stream && !p.wantTokens { // a whole answer of text: what the cache can give back
		j.cacheKey = task.CacheKey(&m.Model, &j.spec.Spec, fmt.Sprintf("llama.cpp /infill|n_indent=%d", p.nIndent))
	}
	return j, p, nil
}

// infillRequest reads /infill's own fields into a FIM request.
func infillRequest(req *llamaRequest) (fim.Request, error) {
	r := fim.Request{Prefix: req.InputPrefix, Suffix: req.InputSuffix}
	if len(req.Prompt) > 0 && string(req.Prompt) != "null" {
		if err := json.Unmarshal(req.Prompt, &r.Prompt); err != nil {
			return r, wire.BadParam("prompt", "prompt of /infill must be a string (the text typed after the prefix)")
		}
	}
	for i, e := range req.InputExtra {
		if e.Text == nil {
			return r, wire.BadParam("input_extra", "input_extra[%d] must have a \"text\" field with a string value", i)
		}
		r.Extra = append(r.Extra, fim.File{Name: e.Filename, Text: *e.Text})
	}
	return r, nil
}

// cachedRun is a completion-cache answer dressed as a finished run: the
// whole prompt counts as cached and no work was done.
func cachedRun(j *llamaJob, p *llamaParams, c task.Cached) *llamaRun {
	r := &llamaRun{job: j, p: p, content: []byte(c.Text), predicted: c.Tokens, stopType: c.Finish,
		stopWord: c.StopWord, truncated: j.truncated, fromCache: true}
	r.result = sched.Result{PromptTokens: len(j.spec.Prompt), CachedTokens: len(j.spec.Prompt), Generated: c.Tokens}
	return r
}
