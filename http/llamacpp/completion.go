package llamacpp

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// completion is POST /completion: one prompt (or several, answered as
// an array) continued in the class the request names, by default the
// server's.
func (a *api) completion(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req completionRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	class, err := a.host.Class(ctx, "")
	if err != nil {
		return err
	}
	jobs, p, err := completionJobs(m, &req, class)
	if err != nil {
		return err
	}
	// Submitted by the time run returns (a stream's start runs before it
	// answers).
	defer freeJobs(jobs)
	return a.run(ctx, m, jobs, p)
}

// completionJobs checks a /completion request and renders its prompts.
func completionJobs(m *task.Model, req *completionRequest, class sched.Class) ([]*promptJob, *completionParams, error) {
	p, err := readParams(m, req)
	if err != nil {
		return nil, nil, err
	}
	prompts, err := wire.ParsePrompts(req.Prompt, "prompt")
	if err != nil {
		return nil, nil, err
	}
	jobs := make([]*promptJob, 0, len(prompts))
	for i, pieces := range prompts {
		if len(pieces) == 1 && pieces[0].Images != nil {
			job, err := mediaJob(m, p, i, pieces[0], class)
			if err != nil {
				freeJobs(jobs)
				return nil, nil, err
			}
			jobs = append(jobs, job)
			continue
		}
		toks, err := wire.PromptTokens(m, pieces, "prompt")
		if err != nil {
			freeJobs(jobs)
			return nil, nil, err
		}
		if err := task.CheckPrompt(m.Desc, toks); err != nil {
			freeJobs(jobs)
			return nil, nil, err
		}
		jobs = append(jobs, p.newJob(i, toks, class))
	}
	return jobs, p, nil
}

// mediaJob is a prompt object's generation: its text and images through
// the request core's media path; the images are freed when it ends.
func mediaJob(m *task.Model, p *completionParams, i int, piece wire.PromptPiece, class sched.Class) (*promptJob, error) {
	mp, err := task.NewMediaPrompt(m, "prompt.multimodal_data", piece.Text, piece.Images, true)
	if err != nil {
		return nil, err
	}
	job := p.newJob(i, mp.Prompt, class)
	job.spec.Media = mp
	return job, nil
}

// freeJobs drops the request's own references to its jobs' images (each
// submitted job holds its own until it ends).
func freeJobs(jobs []*promptJob) {
	for _, j := range jobs {
		j.spec.Media.Close()
	}
}

// run submits the jobs and answers: streamed, or whole — one object,
// or an array when the request had several prompts.
func (a *api) run(ctx *fasthttp.RequestCtx, m *task.Model, jobs []*promptJob, p *completionParams) error {
	if p.stream {
		return a.stream(ctx, m, jobs, p)
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	runs, err := startRuns(rctx, m, jobs, p)
	if err != nil {
		return err
	}
	if err := waitRuns(rctx, m, runs); err != nil {
		return err
	}
	return writeResults(ctx, m, runs, p)
}

// writeResults answers with the runs' results: one object, or an
// array in prompt order.
func writeResults(ctx *fasthttp.RequestCtx, m *task.Model, runs []*completionRun, p *completionParams) error {
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
