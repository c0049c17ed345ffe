package openai

import (
	"context"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// streamChat submits n choices, then streams their deltas as
// chat.completion.chunk events, ending with the usage chunk when asked and
// "data: [DONE]". A failed write cancels every choice; a failed choice
// ends the stream with an error event in OpenAI's shape
// (data: {"error": {…}}) and no [DONE].
func (a *api) streamChat(ctx *fasthttp.RequestCtx, m *task.Model, g *task.Request, id string, created int64, includeUsage bool) error {
	var (
		job     *task.Job
		choices []*choiceOut
	)
	fp := fingerprint(m)
	chunk := func(i int, d oaiDelta, lp *oaiLogprobs, finish *string) oaiChatChunk {
		return oaiChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.Name, SystemFingerprint: fp,
			Choices: []oaiChunkChoice{{Index: i, Delta: d, Logprobs: lp, FinishReason: finish}}}
	}
	return a.host.Stream(ctx, true, func(rctx context.Context) error {
		g.Part = "choice"
		var err error
		if job, err = task.Start(rctx, m, g); err != nil {
			return err
		}
		choices = chatChoices(g.Choices)
		return nil
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		for i := range choices {
			empty := ""
			if ew.Send("", chunk(i, oaiDelta{Role: "assistant", Content: &empty}, nil, nil)) != nil {
				return
			}
		}
		calls := make([]int, len(choices)) // each choice's calls so far
		wire.RunJob(rctx, job, task.SinkFuncs{
			OnDelta: func(i int, evs []reply.Event, d *task.Delta) error {
				c := choices[i]
				var lp *oaiLogprobs
				if d != nil && c.spec.Logprobs > 0 && len(d.Tokens) > 0 {
					lp = &oaiLogprobs{Content: []oaiTokenLogprob{}}
					for k := range d.Tokens {
						lp.Content = append(lp.Content, oaiTokenEntry(m, c.spec, &d.Tokens[k]))
					}
				}
				for _, delta := range oaiEventDeltas(evs, &calls[i]) {
					if err := ew.Send("", chunk(i, delta, lp, nil)); err != nil {
						return err
					}
					lp = nil
				}
				if lp != nil {
					empty := ""
					return ew.Send("", chunk(i, oaiDelta{Content: &empty}, lp, nil))
				}
				return nil
			},
			OnEnded: func(i int, t *task.Turn) error {
				c := choices[i]
				c.TurnOut = wire.TurnOutOf(*t)
				finish := c.FinishReason()
				return ew.Send("", chunk(i, oaiDelta{}, nil, &finish))
			},
			OnFailed: ew.FailAll(cancel),
		})
		if rctx.Err() != nil {
			return
		}
		if includeUsage {
			u := usageOf(g, choices)
			tm := chatTimings(g, choices)
			ew.Send("", oaiChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.Name, SystemFingerprint: fp, Choices: []oaiChunkChoice{}, Usage: &u, Timings: &tm})
		}
		ew.Raw("data: [DONE]\n\n")
	})
}

// oaiEventDeltas words a turn's events as stream deltas. A call is two:
// its id, type and name with empty arguments, then its arguments, the way
// OpenAI streams a call (clients start a call at the first and append
// every later fragment of the same index). calls counts the choice's
// calls so far, which numbers them.
func oaiEventDeltas(evs []reply.Event, calls *int) []oaiDelta {
	var out []oaiDelta
	for _, ev := range evs {
		switch ev.Kind {
		case reply.Content:
			text := ev.Text
			out = append(out, oaiDelta{Content: &text})
		case reply.Reasoning:
			text := ev.Text
			out = append(out, oaiDelta{ReasoningContent: &text})
		case reply.Call:
			index := *calls
			*calls++
			head := oaiReplyCalls([]reply.ToolCall{ev.Call})[0]
			args := head.Function.Arguments
			head.Index, head.Function.Arguments = &index, ""
			out = append(out, oaiDelta{ToolCalls: []oaiToolCallOut{head}},
				oaiDelta{ToolCalls: []oaiToolCallOut{{Index: &index, Function: oaiFunctionOut{Arguments: args}}}})
		}
	}
	return out
}
