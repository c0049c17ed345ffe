package http

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
)

// llamaCompletion is POST /completion: one prompt (or several, answered as
// an array) continued in the class the request names, by default the
// server's.
func (s *Server) llamaCompletion(ctx *fasthttp.RequestCtx, m *Model) error {
	var req llamaRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	class, err := s.requestClass(ctx, "")
	if err != nil {
		return err
	}
	jobs, p, err := completionJobs(m, &req, class)
	if err != nil {
		return err
	}
	return s.runLlama(ctx, m, jobs, p)
}

// completionJobs checks a /completion request and renders its prompts.
func completionJobs(m *Model, req *llamaRequest, class sched.Class) ([]*llamaJob, *llamaParams, error) {
	p, err := llamaOptions(m, req)
	if err != nil {
		return nil, nil, err
	}
	prompts, err := wire.ParsePrompts(req.Prompt, "prompt")
	if err != nil {
		return nil, nil, err
	}
	jobs := make([]*llamaJob, 0, len(prompts))
	for i, pieces := range prompts {
		toks, err := wire.PromptTokens(&m.Model, pieces, "prompt")
		if err != nil {
			return nil, nil, err
		}
		if err := wire.CheckPrompt(&m.Model, toks); err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, p.newLlamaJob(i, toks, class))
	}
	return jobs, p, nil
}

// runLlama submits the jobs and answers: streamed, or whole — one object,
// or an array when the request had several prompts.
func (s *Server) runLlama(ctx *fasthttp.RequestCtx, m *Model, jobs []*llamaJob, p *llamaParams) error {
	if p.stream {
		return s.streamLlama(ctx, m, jobs, p)
	}
	rctx, done := s.requestContext(ctx)
	defer done()
	runs, err := startRuns(rctx, m, jobs, p)
	if err != nil {
		return err
	}
	if err := waitRuns(rctx, m, runs); err != nil {
		return err
	}
	return writeLlamaResults(ctx, m, runs, p)
}

// writeLlamaResults answers with the runs' results: one object, or an
// array in prompt order.
func writeLlamaResults(ctx *fasthttp.RequestCtx, m *Model, runs []*llamaRun, p *llamaParams) error {
	parts := make([][]byte, len(runs))
	for i, r := range runs {
		res := r.response(m, false)
		b, err := res.marshal(p.fields)
		if err != nil {
			return wire.ServerError("encoding the response: %v", err)
		}
		parts[i] = b
	}
	body := parts[0]
	if len(parts) > 1 {
		body = append(append([]byte{'['}, bytes.Join(parts, []byte{','})...), ']')
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
	return nil
}
