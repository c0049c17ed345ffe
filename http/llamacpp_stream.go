package http

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
)

// streamLlama streams runs as llama.cpp does: an SSE "data:" event for each
// piece of text, tagged with its prompt's index, then one last event per
// run with stop: true and the final fields (filtered by response_fields);
// no [DONE]. The runs are submitted before the response starts, so that a
// refusal still gets its status code. A failed write cancels every run.
func (s *Server) streamLlama(ctx *fasthttp.RequestCtx, m *Model, jobs []*llamaJob, p *llamaParams) error {
	rctx, cancel := s.requestContext(ctx)
	runs, err := startRuns(rctx, m, jobs, p)
	if err != nil {
		cancel()
		return err
	}
	streamResponse(ctx, true, func(ew *eventWriter) {
		defer cancel()
		var mu sync.Mutex // runs write their events one at a time
		send := func(v any) error {
			mu.Lock()
			defer mu.Unlock()
			return ew.send("", v)
		}
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				streamRun(rctx, m, r, send, cancel)
			}()
		}
		wg.Wait()
	})
	return nil
}

// streamRun sends one run's events.
func streamRun(ctx context.Context, m *Model, r *llamaRun, send func(any) error, cancel func()) {
	prompt := len(r.job.spec.Prompt)
	err := r.wait(ctx, m, func(text []byte, toks []tokenOut) error {
		ev := llamaPartial{Index: r.job.index, Content: string(text), Tokens: make([]engine.Token, 0, len(toks)),
			IDSlot: -1, TokensPredicted: r.seen, TokensEvaluated: prompt}
		for i := range toks {
			ev.Tokens = append(ev.Tokens, toks[i].ID)
			if r.p.nProbs > 0 {
				ev.Probs = append(ev.Probs, llamaProbOf(m, &toks[i], r.p.nProbs))
			}
		}
		return send(ev)
	})
	if err != nil {
		if ctx.Err() == nil {
			e := asAPIError(err)
			send(map[string]any{"error": map[string]any{"code": e.Status, "message": e.Msg, "type": e.Type}})
		}
		cancel() // the client is gone or the engine failed: stop every run
		return
	}
	res := r.response(m, true)
	b, err := res.marshal(r.p.fields)
	if err != nil {
		return
	}
	send(json.RawMessage(b))
}
