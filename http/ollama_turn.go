package http

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// runOllamaTurn answers an /api/chat job, streamed or whole. Its reply
// is read as a turn: thinking, content and tool calls each go to their own
// field of the message. Streamed, text goes out as it is read and each
// call in the line where it completes, as Ollama streams calls.
func (s *Server) runOllamaTurn(ctx *fasthttp.RequestCtx, job *ollamaJob) error {
	if !job.stream {
		rctx, done := s.requestContext(ctx)
		defer done()
		run, err := wire.StartOne(rctx, &job.model.Model, job.g, false)
		if err != nil {
			return err
		}
		var tr ollamaTrace
		out, err := s.followOllamaTurn(rctx, job, run, &tr, nil)
		if err != nil {
			return err
		}
		msg := ollamaReply{Role: "assistant", Content: out.Content, Thinking: out.Reasoning, ToolCalls: ollamaCalls(out.Calls, 0)}
		return wire.WriteJSON(ctx, job.finalTurn(job.result(out.Outcome, &tr), msg, tr.logprobs))
	}
	var run *task.Job
	return s.host().Stream(ctx, false, func(rctx context.Context) error {
		var err error
		run, err = wire.StartOne(rctx, &job.model.Model, job.g, false)
		return err
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		var tr ollamaTrace
		out, err := s.followOllamaTurn(rctx, job, run, &tr, func(msg ollamaReply) error {
			lps := tr.logprobs
			tr.logprobs = nil
			return ew.Send("", ollamaChatResponse{Model: job.name, CreatedAt: time.Now().UTC(), Message: msg, Logprobs: lps})
		})
		if err != nil {
			ew.Fail(err)
			return
		}
		ew.Send("", job.finalTurn(job.result(out.Outcome, &tr), ollamaReply{Role: "assistant"}, nil))
	})
}

// followOllamaTurn follows a submitted job, filling tr and handing send
// (when not nil) one message per delta that shows something.
func (s *Server) followOllamaTurn(ctx context.Context, job *ollamaJob, run *task.Job, tr *ollamaTrace, send func(ollamaReply) error) (wire.TurnOut, error) {
	collect := tr.emit(job)
	calls := 0
	return wire.FollowOne(ctx, run, func(evs []reply.Event, d *task.Delta) error {
		if d != nil && collect != nil {
			collect(d)
		}
		if send == nil {
			return nil
		}
		msg := ollamaReply{Role: "assistant"}
		for _, ev := range evs {
			switch ev.Kind {
			case reply.Content:
				msg.Content += ev.Text
			case reply.Reasoning:
				msg.Thinking += ev.Text
			case reply.Call:
				msg.ToolCalls = append(msg.ToolCalls, ollamaCalls([]reply.ToolCall{ev.Call}, calls)...)
				calls++
			}
		}
		if msg.Content == "" && msg.Thinking == "" && len(msg.ToolCalls) == 0 && tr.logprobs == nil {
			return nil
		}
		return send(msg)
	})
}

// finalTurn is the last response of a chat turn: done, why, the metrics,
// and, unstreamed, the whole message.
func (job *ollamaJob) finalTurn(res ollamaResult, msg ollamaReply, lps []ollamaLogprob) ollamaChatResponse {
	return ollamaChatResponse{Model: job.name, CreatedAt: time.Now().UTC(), Message: msg,
		Done: true, DoneReason: res.reason, ollamaMetrics: res.metrics, Logprobs: lps}
}
