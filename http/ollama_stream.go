package http

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// ollamaResult is what a finished job reports in its last response.
type ollamaResult struct {
	text    string
	reason  string // done_reason: "stop" or "length"
	context []engine.Token
	metrics ollamaMetrics
}

// runOllama answers a job: at once for a load request, else streamed as
// newline-delimited JSON (Ollama's default) or as one JSON object.
func (s *Server) runOllama(ctx *fasthttp.RequestCtx, job *ollamaJob) error {
	if job.g == nil {
		return wire.WriteJSON(ctx, job.final(ollamaResult{reason: job.loadReason}, nil))
	}
	if hit, ok := s.cachedCompletion(job.model, job.g); ok {
		res := ollamaResult{text: hit.Text, reason: hit.Finish,
			metrics: ollamaMetrics{TotalDuration: time.Since(job.start), PromptEvalCount: len(job.g.Prompt), EvalCount: hit.Tokens}}
		if !job.stream {
			return wire.WriteJSON(ctx, job.final(res, nil))
		}
		return s.host().Stream(ctx, false, nil, func(_ context.Context, _ context.CancelFunc, ew *wire.EventWriter) {
			if ew.Send("", job.chunk(hit.Text, nil)) == nil {
				res.text = ""
				ew.Send("", job.final(res, nil))
			}
		})
	}
	if job.g.Reply != nil {
		return s.runOllamaTurn(ctx, job)
	}
	if job.stream {
		return s.streamOllama(ctx, job)
	}
	rctx, done := s.requestContext(ctx)
	defer done()
	var tr ollamaTrace
	run, err := wire.StartOne(rctx, &job.model.Model, job.g, true)
	if err != nil {
		return err
	}
	out, err := wire.FollowOneRaw(rctx, run, tr.emit(job))
	if err != nil {
		return err
	}
	s.rememberCompletion(job.model, job.g, out)
	res := job.result(out, &tr)
	res.text = string(out.Text)
	return wire.WriteJSON(ctx, job.final(res, tr.logprobs))
}

// streamOllama submits the job, then writes one JSON line per visible
// piece of text and a last line with done: true and the metrics. A failed
// write (the client left) cancels the generation; an engine failure is
// reported as an {"error": …} line, which Ollama's client returns as an
// error.
func (s *Server) streamOllama(ctx *fasthttp.RequestCtx, job *ollamaJob) error {
	var run *task.Job
	return s.host().Stream(ctx, false, func(rctx context.Context) error {
		var err error
		run, err = wire.StartOne(rctx, &job.model.Model, job.g, cacheKey(job.model, job.g) != "")
		return err
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		var tr ollamaTrace
		collect := tr.emit(job)
		out, err := wire.FollowOneRaw(rctx, run, func(d *task.Delta) error {
			if collect != nil {
				collect(d)
			}
			if len(d.Text) == 0 && tr.logprobs == nil {
				return nil
			}
			lps := tr.logprobs
			tr.logprobs = nil
			return ew.Send("", job.chunk(string(d.Text), lps))
		})
		if err != nil {
			ew.Fail(err)
			return
		}
		s.rememberCompletion(job.model, job.g, out)
		ew.Send("", job.final(job.result(out, &tr), nil))
	})
}

// ollamaTrace collects, as tokens stream, what the last response reports
// besides text: the reply's tokens for "context" and the logprobs.
type ollamaTrace struct {
	tokens   []engine.Token
	logprobs []ollamaLogprob
}

// emit returns the delta callback that fills the trace, or nil when the
// job needs neither.
func (tr *ollamaTrace) emit(job *ollamaJob) func(d *task.Delta) error {
	if !job.context && job.g.Logprobs == 0 {
		return nil
	}
	return func(d *task.Delta) error {
		for i := range d.Tokens {
			t := &d.Tokens[i]
			if job.context {
				tr.tokens = append(tr.tokens, t.ID)
			}
			if job.g.Logprobs > 0 {
				tr.logprobs = append(tr.logprobs, ollamaLogprobOf(job.model, job.g, t))
			}
		}
		return nil
	}
}

func ollamaLogprobOf(m *Model, g *task.Request, t *task.TokenOut) ollamaLogprob {
	lp := ollamaLogprob{ollamaTokenLogprob: ollamaTokenLogprob{Token: string(t.Piece), Logprob: float64(t.Logprob), Bytes: wire.ByteList(t.Piece)}}
	task.EachTop(&m.Model, t, g.TopLogprobs, func(_ engine.Token, piece []byte, logprob float32) {
		lp.TopLogprobs = append(lp.TopLogprobs, ollamaTokenLogprob{Token: string(piece), Logprob: float64(logprob), Bytes: wire.ByteList(piece)})
	})
	return lp
}

// result is a finished generation in Ollama's terms. load_duration is
// everything before the prompt started being evaluated — rendering,
// tokenizing and waiting for a lane — since the model itself is never
// loaded on demand; the durations add up to total_duration.
func (job *ollamaJob) result(out task.Outcome, tr *ollamaTrace) ollamaResult {
	r := out.Result
	total := time.Since(job.start)
	res := ollamaResult{reason: out.Finish, metrics: ollamaMetrics{
		TotalDuration: total, LoadDuration: max(total-r.Prefill-r.Decode, 0),
		PromptEvalCount: len(job.g.Prompt), PromptEvalDuration: r.Prefill,
		EvalCount: out.Completed, EvalDuration: r.Decode,
	}}
	if job.context {
		res.context = append(append(make([]engine.Token, 0, len(job.g.Prompt)+len(tr.tokens)), job.g.Prompt...), tr.tokens...)
	}
	return res
}

// chunk is one streamed piece of the reply.
func (job *ollamaJob) chunk(text string, lps []ollamaLogprob) any {
	now := time.Now().UTC()
	if job.chat {
		return ollamaChatResponse{Model: job.name, CreatedAt: now, Message: ollamaReply{Role: "assistant", Content: text}, Logprobs: lps}
	}
	return ollamaGenerateResponse{Model: job.name, CreatedAt: now, Response: text, Logprobs: lps}
}

// final is the response that ends a job: done, why, and the metrics.
func (job *ollamaJob) final(res ollamaResult, lps []ollamaLogprob) any {
	now := time.Now().UTC()
	if job.chat {
		return ollamaChatResponse{Model: job.name, CreatedAt: now, Message: ollamaReply{Role: "assistant", Content: res.text},
			Done: true, DoneReason: res.reason, ollamaMetrics: res.metrics, Logprobs: lps}
	}
	return ollamaGenerateResponse{Model: job.name, CreatedAt: now, Response: res.text, Done: true, DoneReason: res.reason,
		Context: res.context, ollamaMetrics: res.metrics, Logprobs: lps}
}

// ollamaCacheTag keeps this API's completion-cache entries apart from the
// other APIs': each stores its own finish names and text conventions.
const ollamaCacheTag = "ollama /api/generate"

// cacheKey is g's completion-cache key (task.CacheKey), "" for a chat
// turn, whose reply is parsed rather than shown as text.
func cacheKey(m *Model, g *task.Request) string {
	if g.Reply != nil {
		return ""
	}
	return task.CacheKey(&m.Model, &g.Spec, ollamaCacheTag)
}

func (s *Server) cachedCompletion(m *Model, g *task.Request) (task.Cached, bool) {
	key := cacheKey(m, g)
	if key == "" {
		return task.Cached{}, false
	}
	return s.fimCache.Get(key)
}

// rememberCompletion caches a greedy FIM answer that ran to its end.
func (s *Server) rememberCompletion(m *Model, g *task.Request, out task.Outcome) {
	key := cacheKey(m, g)
	if key == "" || (out.Finish != "stop" && out.Finish != "length") {
		return
	}
	s.fimCache.Put(task.Cached{Key: key, Text: string(out.Text), Tokens: out.Completed, Finish: out.Finish, StopWord: out.StopWord})
}
