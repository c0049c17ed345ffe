package http

import (
	"context"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// streamLlama streams runs as llama.cpp does: an SSE "data:" event for each
// piece of text, tagged with its prompt's index, then one last event per
// run with stop: true and the final fields (filtered by response_fields);
// no [DONE]. The runs are submitted before the response starts, so that a
// refusal still gets its status code. A failed write cancels every run; a
// failed run ends the stream with an error event in llama.cpp's shape.
func (s *Server) streamLlama(ctx *fasthttp.RequestCtx, m *Model, jobs []*llamaJob, p *llamaParams) error {
	var runs []*llamaRun
	return s.host().Stream(ctx, true, func(rctx context.Context) error {
		var err error
		runs, err = startRuns(rctx, m, jobs, p)
		return err
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		followRuns(rctx, m, runs, func(r *llamaRun, text []byte, toks []task.TokenOut) error {
			ev := llamaPartial{Index: r.job.index, Content: string(text), Tokens: make([]engine.Token, 0, len(toks)),
				IDSlot: -1, TokensPredicted: r.seen, TokensEvaluated: len(r.job.spec.Prompt)}
			for i := range toks {
				ev.Tokens = append(ev.Tokens, toks[i].ID)
				if r.p.nProbs > 0 {
					ev.Probs = append(ev.Probs, llamaProbOf(m, &toks[i], r.p.nProbs))
				}
			}
			return ew.Send("", ev)
		}, func(r *llamaRun) error {
			res := r.response(m, true)
			b, err := res.marshal(r.p.fields)
			if err != nil {
				return err
			}
			return ew.Send("", json.RawMessage(b))
		}, ew.FailAll(cancel))
	})
}
