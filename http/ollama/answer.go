package ollama

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// cacheTag keeps this API's completion-cache entries apart from the
// other APIs': each stores its own finish names and text conventions.
const cacheTag = "ollama /api/generate"

// answer is every job's one path: at once for a load request; else from
// the completion cache when it holds the answer (task.CacheKey, the
// cache's one rule; a chat turn, whose reply is parsed rather than shown
// as text, never qualifies); else through task.Start and Job.Run. The
// reply is streamed as newline-delimited JSON (Ollama's default) or
// written as one JSON object; the two differ only in where the pieces go
// (reader). A failed write (the client left) cancels the generation; an
// engine failure mid-stream is an {"error": …} line, which Ollama's client
// returns as an error.
func (a *api) answer(ctx *fasthttp.RequestCtx, j *job) error {
	if j.req != nil {
		// Submitted by the time the answer returns (a stream's start
		// runs before it answers): the job holds its own reference.
		defer j.req.Media.Close()
	}
	if j.req == nil {
		return wire.WriteJSON(ctx, j.final(result{reason: j.loadReason}, replyMessage{Role: "assistant"}, nil))
	}
	key := ""
	if j.req.Reply == nil {
		key = task.CacheKey(j.model, &j.req.Spec, cacheTag)
	}
	if key != "" {
		if hit, ok := a.host.CompletionCache().Get(key); ok {
			return a.answerCached(ctx, j, hit)
		}
	}
	// A raw answer given whole, or one to cache, keeps its text.
	j.req.Collect = !j.stream || key != ""
	if !j.stream {
		rctx, done := a.host.RequestContext(ctx)
		defer done()
		r := &reader{job: j}
		msg, res, err := a.run(rctx, j, key, r)
		if err != nil {
			return err
		}
		return wire.WriteJSON(ctx, j.final(res, msg, r.logprobs))
	}
	var run *task.Job
	return a.host.Stream(ctx, false, func(rctx context.Context) error {
		var err error
		run, err = task.Start(rctx, j.model, j.req)
		return wire.Convert(err)
	}, func(rctx context.Context, _ context.CancelFunc, ew *wire.EventWriter) {
		r := &reader{job: j, send: func(msg replyMessage, lps []logprob) error { return ew.Send("", j.chunk(msg, lps)) }}
		_, res, err := a.follow(rctx, j, key, run, r)
		if err != nil {
			ew.Fail(err)
			return
		}
		ew.Send("", j.final(res, replyMessage{Role: "assistant"}, nil))
	})
}

// run starts and follows a job answered whole.
func (a *api) run(ctx context.Context, j *job, key string, r *reader) (replyMessage, result, error) {
	run, err := task.Start(ctx, j.model, j.req)
	if err != nil {
		return replyMessage{}, result{}, wire.Convert(err)
	}
	return a.follow(ctx, j, key, run, r)
}

// follow runs a started job to its end through r, caches a raw answer
// that qualifies, and returns the whole reply and the last response's
// result.
func (a *api) follow(ctx context.Context, j *job, key string, run *task.Job, r *reader) (replyMessage, result, error) {
	turns, err := run.Run(ctx, task.SinkFuncs{OnDelta: func(_ int, evs []reply.Event, d *task.Delta) error { return r.delta(evs, d) }})
	if err != nil {
		return replyMessage{}, result{}, wire.Convert(err)
	}
	t := turns[0]
	if key != "" && (t.Finish == "stop" || t.Finish == "length") {
		a.host.CompletionCache().Put(task.Cached{Key: key, Text: string(t.Text), Tokens: t.Completed, Finish: t.Finish, StopWord: t.StopWord})
	}
	msg := replyMessage{Role: "assistant", Content: string(t.Text)}
	if j.req.Reply != nil {
		msg = replyMessage{Role: "assistant", Content: t.Content, Thinking: t.Reasoning, ToolCalls: replyCalls(t.Calls, 0)}
	}
	return msg, j.result(t.Outcome, r.tokens), nil
}

// answerCached answers from the completion cache as a finished generation
// is answered: whole, or one piece and the last line.
func (a *api) answerCached(ctx *fasthttp.RequestCtx, j *job, hit task.Cached) error {
	res := result{reason: hit.Finish,
		metrics: metrics{TotalDuration: time.Since(j.start), PromptEvalCount: len(j.req.Prompt), EvalCount: hit.Tokens}}
	msg := replyMessage{Role: "assistant", Content: hit.Text}
	if !j.stream {
		return wire.WriteJSON(ctx, j.final(res, msg, nil))
	}
	return a.host.Stream(ctx, false, nil, func(_ context.Context, _ context.CancelFunc, ew *wire.EventWriter) {
		if ew.Send("", j.chunk(msg, nil)) == nil {
			ew.Send("", j.final(res, replyMessage{Role: "assistant"}, nil))
		}
	})
}

// reader turns what the core hands back into Ollama's pieces: each
// delta's tokens for "context" and its logprobs, and, streamed, one
// message per delta that shows something — raw text as it is, a turn's
// thinking, content and each call in the line where it completes, as
// Ollama streams calls.
type reader struct {
	job      *job
	send     func(msg replyMessage, lps []logprob) error // nil: answered whole
	tokens   []engine.Token
	logprobs []logprob // whole: all of them; streamed: those not sent yet
	calls    int
}

func (r *reader) delta(evs []reply.Event, d *task.Delta) error {
	j := r.job
	if d != nil && (j.context || j.req.Logprobs > 0) {
		for i := range d.Tokens {
			t := &d.Tokens[i]
			if j.context {
				r.tokens = append(r.tokens, t.ID)
			}
			if j.req.Logprobs > 0 {
				r.logprobs = append(r.logprobs, logprobOf(j.model, j.req, t))
			}
		}
	}
	if r.send == nil {
		return nil
	}
	msg := replyMessage{Role: "assistant"}
	if j.req.Reply == nil && d != nil {
		msg.Content = string(d.Text)
	}
	for _, ev := range evs {
		switch ev.Kind {
		case reply.Content:
			msg.Content += ev.Text
		case reply.Reasoning:
			msg.Thinking += ev.Text
		case reply.Call:
			msg.ToolCalls = append(msg.ToolCalls, replyCalls([]reply.ToolCall{ev.Call}, r.calls)...)
			r.calls++
		}
	}
	if msg.Content == "" && msg.Thinking == "" && len(msg.ToolCalls) == 0 && r.logprobs == nil {
		return nil
	}
	lps := r.logprobs
	r.logprobs = nil
	return r.send(msg, lps)
}

func logprobOf(m *task.Model, req *task.Request, t *task.TokenOut) logprob {
	lp := logprob{tokenLogprob: tokenLogprob{Token: string(t.Piece), Logprob: float64(t.Logprob), Bytes: wire.ByteList(t.Piece)}}
	task.EachTop(m, t, req.TopLogprobs, func(_ engine.Token, piece []byte, logprob float32) {
		lp.TopLogprobs = append(lp.TopLogprobs, tokenLogprob{Token: string(piece), Logprob: float64(logprob), Bytes: wire.ByteList(piece)})
	})
	return lp
}

// result is what a finished job reports in its last response.
type result struct {
	reason  string // done_reason: "stop" or "length"
	context []engine.Token
	metrics metrics
}

// result is a finished generation in Ollama's terms. load_duration is
// everything before the prompt started being evaluated — rendering,
// tokenizing and waiting for a lane — since the model itself is never
// loaded on demand; the durations add up to total_duration.
func (j *job) result(out task.Outcome, reply []engine.Token) result {
	r := out.Result
	total := time.Since(j.start)
	res := result{reason: out.Finish, metrics: metrics{
		TotalDuration: total, LoadDuration: max(total-r.Prefill-r.Decode, 0),
		PromptEvalCount: len(j.req.Prompt), PromptEvalDuration: r.Prefill,
		EvalCount: out.Completed, EvalDuration: r.Decode,
	}}
	if j.context {
		res.context = append(append(make([]engine.Token, 0, len(j.req.Prompt)+len(reply)), j.req.Prompt...), reply...)
	}
	return res
}

// chunk is one streamed piece of the reply.
func (j *job) chunk(msg replyMessage, lps []logprob) any {
	now := time.Now().UTC()
	if j.chat {
		return chatResponse{Model: j.name, CreatedAt: now, Message: msg, Logprobs: lps}
	}
	return generateResponse{Model: j.name, CreatedAt: now, Response: msg.Content, Logprobs: lps}
}

// final is the response that ends a job: done, why, the metrics, and,
// answered whole, the whole reply.
func (j *job) final(res result, msg replyMessage, lps []logprob) any {
	now := time.Now().UTC()
	if j.chat {
		return chatResponse{Model: j.name, CreatedAt: now, Message: msg,
			Done: true, DoneReason: res.reason, metrics: res.metrics, Logprobs: lps}
	}
	return generateResponse{Model: j.name, CreatedAt: now, Response: msg.Content, Done: true, DoneReason: res.reason,
		Context: res.context, metrics: res.metrics, Logprobs: lps}
}
