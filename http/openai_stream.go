package http

import (
	"github.com/valyala/fasthttp"
)

// streamChat submits n choices, then streams their deltas as
// chat.completion.chunk events, ending with the usage chunk when asked and
// "data: [DONE]". A failed write cancels every choice; a failed choice
// ends the stream with an error event in OpenAI's shape
// (data: {"error": {…}}) and no [DONE].
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
		for i := range choices {
			empty := ""
			if ew.send("", chunk(i, oaiDelta{Role: "assistant", Content: &empty}, nil, nil)) != nil {
				return
			}
		}
		fanOut("choice", n, func(i int) error {
			c := choices[i]
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
				return ew.send("", chunk(i, oaiDelta{Content: &text}, lp, nil))
			})
			if err != nil {
				return err
			}
			finish := c.Finish
			return ew.send("", chunk(i, oaiDelta{}, nil, &finish))
		}, ew.failAll(cancel))
		if rctx.Err() != nil {
			return
		}
		if includeUsage {
			u := usageOf(g, choices)
			ew.send("", oaiChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.Name, SystemFingerprint: fp, Choices: []oaiChunkChoice{}, Usage: &u})
		}
		ew.raw("data: [DONE]\n\n")
	})
	return nil
}
