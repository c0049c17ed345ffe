package http

import (
	"sync"

	"github.com/valyala/fasthttp"
)

// streamChat submits n choices, then streams their deltas as
// chat.completion.chunk events, ending with the usage chunk when asked and
// "data: [DONE]". A failed write cancels every choice.
func (s *Server) streamChat(ctx *fasthttp.RequestCtx, m *Model, g *genSpec, n int, id string, created int64, includeUsage bool) error {
	rctx, cancel := s.requestContext(ctx)
	choices := make([]*choiceOut, n)
	for i := range n {
		c := &choiceOut{spec: g.withSeed(i)}
		st, err := submit(rctx, m, c.spec)
		if err != nil {
			cancel()
			return err
		}
		c.st = st
		choices[i] = c
	}
	fp := fingerprint(m)
	chunk := func(i int, d oaiDelta, lp *oaiLogprobs, finish *string) oaiChatChunk {
		return oaiChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.Name, SystemFingerprint: fp,
			Choices: []oaiChunkChoice{{Index: i, Delta: d, Logprobs: lp, FinishReason: finish}}}
	}
	streamResponse(ctx, true, func(ew *eventWriter) {
		defer cancel()
		var mu sync.Mutex // choices write their events one at a time
		send := func(v any) error {
			mu.Lock()
			defer mu.Unlock()
			return ew.send("", v)
		}
		for i := range choices {
			empty := ""
			if send(chunk(i, oaiDelta{Role: "assistant", Content: &empty}, nil, nil)) != nil {
				return
			}
		}
		var wg sync.WaitGroup
		for i, c := range choices {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				c.outcome, err = follow(rctx, m, c.spec, c.st, false, func(d *delta) error {
					var lp *oaiLogprobs
					if c.spec.Logprobs > 0 {
						lp = &oaiLogprobs{Content: []oaiTokenLogprob{}}
						for k := range d.Tokens {
							lp.Content = append(lp.Content, oaiTokenEntry(m, c.spec, &d.Tokens[k]))
						}
					}
					text := string(d.Text)
					return send(chunk(i, oaiDelta{Content: &text}, lp, nil))
				})
				if err != nil {
					cancel() // the client is gone or the engine failed: stop every choice
					return
				}
				finish := c.Finish
				send(chunk(i, oaiDelta{}, nil, &finish))
			}()
		}
		wg.Wait()
		if rctx.Err() != nil {
			return
		}
		if includeUsage {
			u := usageOf(g, choices)
			send(oaiChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.Name, SystemFingerprint: fp, Choices: []oaiChunkChoice{}, Usage: &u})
		}
		mu.Lock()
		ew.raw("data: [DONE]\n\n")
		mu.Unlock()
	})
	return nil
}
